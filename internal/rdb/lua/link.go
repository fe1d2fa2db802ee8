// Package lua holds the Redis scripts of package rdb, one atomic
// transition a file, each headed by its KEYS / ARGV / returns contract,
// and links them: Redis runs a script with nothing but its own source, so
// the definitions the scripts share are written once, in lib/, and each
// script is given those it names (Linked).
package lua

import (
	"embed"
	"fmt"
	"regexp"
	"strings"
)

//go:embed *.lua lib/*.lua
var luaFiles embed.FS

// libNames are the files of lib, in the order their local
// definitions are written (a definition uses only those before it), so
// that the fence check, the end of an acknowledgement, the state write,
// the group record, a take and an aggregation group's filing are each
// written once; libDefs reads the definitions from them.
var libNames = []string{"now", "keep", "due", "fence", "band", "limit", "forget", "state", "group", "queue", "aggregate", "take", "graph"}

// libDef is one top-level definition of lib (a local function or
// table, with the comment above it), the name it defines and the
// identifiers its code names.
type libDef struct {
	name  string
	src   string
	names []string
}

var (
	luaIdent = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	luaLocal = regexp.MustCompile(`^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)
)

// libDefs are the definitions of lib, in libNames' order.
var libDefs = func() []libDef {
	var defs []libDef
	for _, file := range libNames {
		b, err := luaFiles.ReadFile("lib/" + file + ".lua")
		if err != nil {
			panic(fmt.Sprintf("lua: missing embedded Lua library %s: %v", file, err))
		}
		lines := strings.SplitAfter(string(b), "\n")
		var starts []int // each definition's first line, its comment included
		var names []string
		for i, line := range lines {
			m := luaLocal.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			first := i
			for first > 0 && strings.HasPrefix(lines[first-1], "--") && (len(starts) == 0 || first-1 > starts[len(starts)-1]) {
				first--
			}
			starts = append(starts, first)
			names = append(names, m[1])
		}
		if len(starts) == 0 || strings.TrimSpace(luaCode(strings.Join(lines[:starts[0]], ""))) != "" {
			panic(fmt.Sprintf("lua: library %s has code outside its local definitions", file))
		}
		for j, first := range starts {
			end := len(lines)
			if j+1 < len(starts) {
				end = starts[j+1]
			}
			src := strings.Join(lines[first:end], "")
			if !strings.HasSuffix(src, "\n") {
				src += "\n"
			}
			defs = append(defs, libDef{name: names[j], src: src, names: luaIdent.FindAllString(luaCode(src), -1)})
		}
	}
	return defs
}()

// luaCode returns src without its comments ("--" to the end of a line,
// outside string literals; the scripts have no long comments or long
// strings).
func luaCode(src string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		var quote byte
		cut := len(line)
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case quote != 0 && c == '\\':
				i++
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '-' && i+1 < len(line) && line[i+1] == '-':
				cut = i
				i = len(line)
			}
		}
		b.WriteString(line[:cut])
		if cut < len(line) {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// luaLibFor returns the Lua a script with source src starts with: the
// definitions of lib its code names, and those they name in turn, in
// libDefs' order. A script run defines again every function it starts
// with (EVALSHA runs the whole body), so a script carries only those it
// may call.
func luaLibFor(src string) string {
	named := make(map[string]bool)
	for _, id := range luaIdent.FindAllString(luaCode(src), -1) {
		named[id] = true
	}
	in := make([]bool, len(libDefs))
	for changed := true; changed; {
		changed = false
		for i, d := range libDefs {
			if in[i] || !named[d.name] {
				continue
			}
			in[i], changed = true, true
			for _, id := range d.names {
				named[id] = true
			}
		}
	}
	var b strings.Builder
	for i, d := range libDefs {
		if in[i] {
			b.WriteString(d.src)
		}
	}
	return b.String()
}

// Mark is the line of a script above which its prelude is: code that
// runs before the lib definitions are made (each run makes them again, a
// closure each), so that a common case that needs none of them can return
// without paying for them. A script without it starts with its lib.
const Mark = "-- lib definitions here\n"

// Source returns the script name (name.lua) as written, without its lib.
func Source(name string) (string, error) {
	src, err := luaFiles.ReadFile(name + ".lua")
	return string(src), err
}

// Linked returns the script name (name.lua) with its lib (WithLib). It
// panics when there is no such script: scripts are linked as the program
// starts.
func Linked(name string) string {
	src, err := Source(name)
	if err != nil {
		panic(fmt.Sprintf("lua: missing embedded script %s: %v", name, err))
	}
	return WithLib(src)
}

// WithLib returns src with the lib definitions it names (luaLibFor)
// inserted at its Mark line, or at its start.
func WithLib(src string) string {
	prelude, body, ok := strings.Cut(src, Mark)
	if !ok {
		prelude, body = "", src
	}
	return prelude + luaLibFor(src) + "\n" + body
}
