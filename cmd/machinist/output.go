package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSONLine prints v as JSON on one line (for streams of values).
func (a *app) printJSONLine(v any) error {
	return json.NewEncoder(a.stdout).Encode(v)
}

// colored reports whether output is coloured.
func (a *app) colored() bool {
	switch a.color {
	case "always":
		return true
	case "never":
		return false
	}
	return a.tty && a.getenv("NO_COLOR") == ""
}

// ANSI colours of the states.
const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	blue   = "\x1b[34m"
	dim    = "\x1b[2m"
	reset  = "\x1b[0m"
)

// paint wraps s in colour c when output is coloured.
func (a *app) paint(c, s string) string {
	if !a.colored() || s == "" {
		return s
	}
	return c + s + reset
}

// state returns a task state (SUCCESS, FAILURE, …) or task status
// (pending, archived, …), coloured by what it means.
func (a *app) state(s string) string {
	switch strings.ToLower(s) {
	case "success", "completed":
		return a.paint(green, s)
	case "failure", "archived":
		return a.paint(red, s)
	case "started", "received", "active":
		return a.paint(blue, s)
	case "retry", "limited", "scheduled":
		return a.paint(yellow, s)
	case "":
		return a.paint(dim, "unknown")
	}
	return s
}

// table writes rows under a header, in aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// fields writes name: value lines, aligned, skipping empty values.
type fields struct {
	tw *tabwriter.Writer
}

func newFields(w io.Writer) *fields {
	return &fields{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

func (f *fields) add(name, value string) {
	if value != "" {
		fmt.Fprintf(f.tw, "%s\t%s\n", name, value)
	}
}

func (f *fields) flush() error { return f.tw.Flush() }

// stamp formats t in UTC to the second; "" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// ago formats how long before now t was, to the second.
func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return "in " + (-d).String()
	}
	return d.String() + " ago"
}

// clip shortens s to n runes, saying so.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ") // one line
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// args formats a task's arguments as "type value" pairs.
func formatArgs(args []tasks.Arg) string {
	parts := make([]string, len(args))
	for i, arg := range args {
		name := ""
		if arg.Name != "" {
			name = arg.Name + "="
		}
		parts[i] = fmt.Sprintf("%s%s %v", name, arg.Type, value(arg.Value))
	}
	return strings.Join(parts, ", ")
}

// formatResults formats a task's results as "type value" pairs.
func formatResults(rs []*tasks.TaskResult) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s %v", r.Type, value(r.Value))
	}
	return strings.Join(parts, ", ")
}

// value formats an argument or result value: strings quoted, the rest as
// JSON.
func value(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// yesNo formats b.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
