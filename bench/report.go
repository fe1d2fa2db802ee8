package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
)

// interferenceWarn is the share of CPU taken by other processes during a
// run from which the run is repeated (up to -retries times) and, if it
// stays, named in the report.
const interferenceWarn = 5.0

// Status says whether a result holds a measured value.
type Status string

const (
	statusOK      Status = "ok"
	statusNA      Status = "n/a"     // the library has no such feature
	statusTimeout Status = "timeout" // did not finish before its deadline; Value is a lower bound
	statusError   Status = "error"
	statusNever   Status = "never" // the thing measured never happened (lost tasks)
)

// Result is one number: a repetition's measurement ("rep") or the median of
// the repetitions ("median"). Each is printed as one JSON line.
type Result struct {
	Kind     string  `json:"kind"`
	Lib      string  `json:"lib"`
	Workload string  `json:"workload"`
	Variant  string  `json:"variant"`
	Unit     string  `json:"unit"`
	Rep      int     `json:"rep,omitempty"`
	Reps     int     `json:"reps,omitempty"` // medians: how many repetitions had a value
	Value    float64 `json:"value"`
	// Bound is ">=" when Value is a lower bound (the thing measured had
	// not happened by the deadline).
	Bound  string `json:"bound,omitempty"`
	Status Status `json:"status"`
	Note   string `json:"note,omitempty"`
}

// interference is the CPU other processes took during one run.
type interference struct {
	Kind     string  `json:"kind"` // "interference"
	Lib      string  `json:"lib"`
	Workload string  `json:"workload"`
	Rep      int     `json:"rep"`
	OtherCPU float64 `json:"other_cpu_pct"` // % of all CPUs' time, neither this program nor redis-server
}

// key identifies a row and column of the table.
type key struct{ workload, variant, unit, lib string }

// Reporter collects results, writes each as a JSON line, and makes the
// table of medians.
type Reporter struct {
	mu      sync.Mutex
	out     []io.Writer
	results map[key][]Result
	order   []key // first appearance of each row, for the table order
	seen    map[[3]string]bool
	others  []interference
	held    *[]Result // between Hold and Commit or Discard
}

func newReporter(out ...io.Writer) *Reporter {
	return &Reporter{out: out, results: map[key][]Result{}, seen: map[[3]string]bool{}}
}

func (r *Reporter) emit(res Result) {
	if math.IsNaN(res.Value) || math.IsInf(res.Value, 0) {
		res.Value = 0
		if res.Status == statusOK {
			res.Status = statusError
			res.Note = strings.TrimSpace(res.Note + " not a number")
		}
	}
	line, err := json.Marshal(res)
	if err != nil {
		panic(err) // a Result always marshals
	}
	for _, w := range r.out {
		fmt.Fprintf(w, "%s\n", line)
	}
}

// Add records one repetition's result and prints it.
func (r *Reporter) Add(res Result) {
	res.Kind = "rep"
	if res.Status == "" {
		res.Status = statusOK
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held != nil {
		*r.held = append(*r.held, res)
		return
	}
	r.add(res)
}

// Hold keeps the results added from now on until Commit or Discard, so that
// a run disturbed by other processes can be thrown away and repeated.
func (r *Reporter) Hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = new([]Result)
}

// Commit records and prints the held results.
func (r *Reporter) Commit() {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := r.held
	r.held = nil
	if held != nil {
		for _, res := range *held {
			r.add(res)
		}
	}
}

// Discard drops the held results.
func (r *Reporter) Discard() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = nil
}

func (r *Reporter) add(res Result) {
	k := key{res.Workload, res.Variant, res.Unit, res.Lib}
	row := [3]string{res.Workload, res.Variant, res.Unit}
	if !r.seen[row] {
		r.seen[row] = true
		r.order = append(r.order, k)
	}
	r.results[k] = append(r.results[k], res)
	r.emit(res)
}

// Interference records and prints how much CPU other processes took
// during lib's run of workload.
func (r *Reporter) Interference(lib, workload string, rep int, pct float64) {
	it := interference{Kind: "interference", Lib: lib, Workload: workload, Rep: rep, OtherCPU: math.Round(pct*10) / 10}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.others = append(r.others, it)
	line, _ := json.Marshal(it)
	for _, w := range r.out {
		fmt.Fprintf(w, "%s\n", line)
	}
}

// Failed reports whether lib's earlier repetitions of workload/variant
// timed out, so that a run known to take its whole deadline is not
// repeated.
func (r *Reporter) Failed(lib, workload, variant string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, rs := range r.results {
		if k.lib == lib && k.workload == workload && k.variant == variant {
			for _, res := range rs {
				if res.Status == statusTimeout {
					return true
				}
			}
		}
	}
	return false
}

// median computes the median of lib's repetitions of one row.
func median(rs []Result) Result {
	m := rs[0]
	m.Kind, m.Rep = "median", 0
	var vals []float64
	var bounded []bool
	notes := map[string]bool{}
	var noteList []string
	for _, res := range rs {
		if res.Note != "" && !notes[res.Note] {
			notes[res.Note] = true
			noteList = append(noteList, res.Note)
		}
		if res.Status == statusOK || res.Status == statusTimeout {
			vals = append(vals, res.Value)
			bounded = append(bounded, res.Bound != "")
		}
	}
	m.Note = strings.Join(noteList, "; ")
	m.Reps = len(vals)
	if len(vals) == 0 {
		return m // keeps the first repetition's status (n/a or error)
	}
	idx := make([]int, len(vals))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return vals[idx[a]] < vals[idx[b]] })
	mid := idx[len(idx)/2]
	if len(idx)%2 == 0 {
		lo := idx[len(idx)/2-1]
		m.Value = (vals[lo] + vals[mid]) / 2
		m.Bound = ""
		if bounded[lo] || bounded[mid] {
			m.Bound = ">="
		}
	} else {
		m.Value = vals[mid]
		m.Bound = ""
		if bounded[mid] {
			m.Bound = ">="
		}
	}
	m.Status = statusOK
	for _, res := range rs {
		if res.Status == statusTimeout {
			m.Status = statusTimeout
		}
	}
	return m
}

// Medians prints and returns the median of every (row, library).
func (r *Reporter) Medians() map[key]Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[key]Result{}
	keys := make([]key, 0, len(r.results))
	for k := range r.results {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.workload != b.workload {
			return a.workload < b.workload
		}
		if a.variant != b.variant {
			return a.variant < b.variant
		}
		return a.lib < b.lib
	})
	for _, k := range keys {
		m := median(r.results[k])
		out[k] = m
		r.emit(m)
	}
	return out
}

// formatValue renders a number with about three significant digits.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e15:
		return fmt.Sprintf("%.0f", v) // counts
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func cell(m Result, ok bool) string {
	if !ok {
		return "–"
	}
	switch m.Status {
	case statusNA:
		return "n/a"
	case statusNever:
		return "never"
	case statusError:
		if m.Reps == 0 {
			return "error"
		}
	}
	s := formatValue(m.Value)
	if m.Bound != "" {
		s = "≥ " + s
	}
	if m.Status == statusTimeout {
		s += " †"
	}
	return s
}

// Table writes the Markdown table of medians: one row per workload and
// variant, one column per library.
func (r *Reporter) Table(w io.Writer, medians map[key]Result, libs []string, redisLib string) {
	r.mu.Lock()
	order := append([]key(nil), r.order...)
	r.mu.Unlock()

	fmt.Fprintf(w, "| workload | variant (unit) | %s |\n", strings.Join(libs, " | "))
	fmt.Fprintf(w, "|---|---|%s\n", strings.Repeat("---:|", len(libs)))
	var ceiling []key
	var notes []string
	noted := map[string]bool{}
	for _, k := range order {
		if k.lib == redisLib {
			ceiling = append(ceiling, k)
			continue
		}
		cells := make([]string, len(libs))
		for i, lib := range libs {
			m, ok := medians[key{k.workload, k.variant, k.unit, lib}]
			cells[i] = cell(m, ok)
			if ok && m.Note != "" {
				n := fmt.Sprintf("%s, %s: %s", lib, k.workload, m.Note)
				if !noted[n] {
					noted[n] = true
					notes = append(notes, n)
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s (%s) | %s |\n", k.workload, k.variant, k.unit, strings.Join(cells, " | "))
	}
	if len(ceiling) > 0 {
		fmt.Fprintf(w, "\n| ceiling: the same server without a task library (redis-benchmark; the floor rows: go-redis from this program) | %s |\n|---|---:|\n", redisLib)
		for _, k := range ceiling {
			m, ok := medians[k]
			fmt.Fprintf(w, "| %s (%s) | %s |\n", k.variant, k.unit, cell(m, ok))
			if ok && m.Note != "" {
				notes = append(notes, fmt.Sprintf("ceiling %s: %s", k.variant, m.Note))
			}
		}
		fractionTable(w, order, medians, ceiling, libs, redisLib)
	}
	fmt.Fprintln(w)
	r.mu.Lock()
	others := append([]interference(nil), r.others...)
	r.mu.Unlock()
	if len(others) > 0 {
		worst := others[0]
		var disturbed []string
		for _, it := range others {
			if it.OtherCPU > worst.OtherCPU {
				worst = it
			}
			if it.OtherCPU >= interferenceWarn {
				disturbed = append(disturbed, fmt.Sprintf("%s %s rep %d (%.0f %%)", it.Workload, it.Lib, it.Rep, it.OtherCPU))
			}
		}
		fmt.Fprintf(w, "Other processes on the machine took at most %.1f %% of its CPU time during a measured run (%s %s rep %d).", worst.OtherCPU, worst.Workload, worst.Lib, worst.Rep)
		if len(disturbed) > 0 {
			fmt.Fprintf(w, " Runs with %.0f %% or more: %s.", interferenceWarn, strings.Join(disturbed, ", "))
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Medians of the repetitions. `≥` a lower bound (the thing measured had not happened by the deadline); `†` at least one repetition hit its deadline; `n/a` the library has no such feature; `–` not run.")
	if len(notes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Notes:")
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

// fractionTable writes each throughput (tasks or members per second) as a fraction
// of the ceiling rows: of the one-call script rate (the EVAL row) and of
// the mean plain-command rate (the others), both with redis-benchmark's
// 50 clients, one request at a time each. A fraction of 50 % means one
// task (or member) cost Redis as much as two such requests.
func fractionTable(w io.Writer, order []key, medians map[key]Result, ceiling []key, libs []string, redisLib string) {
	var eval, plain float64
	var plains int
	for _, k := range ceiling {
		m, ok := medians[k]
		if !ok || m.Status != statusOK || m.Value <= 0 || k.unit != "ops/s" {
			continue // the floor rows (floor.go) are no redis-benchmark figure
		}
		if strings.HasPrefix(k.variant, "EVAL") {
			eval = m.Value
		} else {
			plain += m.Value
			plains++
		}
	}
	if eval == 0 || plains == 0 {
		return
	}
	plain /= float64(plains)
	fmt.Fprintf(w, "\n| throughput as a share of the ceiling: of EVAL (%s/s) · of plain commands (%s/s) | %s |\n|---|%s\n",
		formatValue(eval), formatValue(plain), strings.Join(libs, " | "), strings.Repeat("---:|", len(libs)))
	for _, k := range order {
		if k.lib == redisLib || !(k.unit == "tasks/s" || k.unit == "members/s") {
			continue
		}
		cells := make([]string, len(libs))
		any := false
		for i, lib := range libs {
			m, ok := medians[key{k.workload, k.variant, k.unit, lib}]
			if !ok || m.Status != statusOK || m.Bound != "" {
				cells[i] = "–"
				continue
			}
			cells[i] = fmt.Sprintf("%.0f %% · %.0f %%", 100*m.Value/eval, 100*m.Value/plain)
			any = true
		}
		if any {
			fmt.Fprintf(w, "| %s: %s (%s) | %s |\n", k.workload, k.variant, k.unit, strings.Join(cells, " | "))
		}
	}
}
