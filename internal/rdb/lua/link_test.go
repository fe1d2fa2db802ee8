package lua

import (
	"regexp"
	"strings"
	"testing"
)

// defined returns the names of the lib definitions lib (luaLibFor's
// answer) carries, in order.
func defined(lib string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(lib, -1) {
		names = append(names, m[1])
	}
	return names
}

// A script carries the lib definitions its code names and, in turn, those
// they name, in the libraries' order; names only in comments bring
// nothing ("--" in a string starts none).
func TestLuaLibFor(t *testing.T) {
	got := strings.Join(defined(luaLibFor("-- held, wake\nlocal x = \"--\" .. forget(a, b) -- put\n")), " ")
	want := "band_list band_split band_join band_push limit_parse limit_queue limit_unpark limit_free free_unique release_holds forget"
	if got != want {
		t.Fatalf("luaLibFor carries %q, want %q", got, want)
	}
	if lib := luaLibFor("return 1\n"); lib != "" {
		t.Fatalf("luaLibFor of a script naming no lib function: %q, want nothing", lib)
	}
}

// Every script carries each lib definition its code, or a definition it
// carries, names: none is left to a global that does not exist.
func TestScriptsCarryTheirLib(t *testing.T) {
	lib := make(map[string]bool)
	for _, d := range libDefs {
		lib[d.name] = true
	}
	ents, err := luaFiles.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		src, err := luaFiles.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		full := luaLibFor(string(src))
		carried := make(map[string]bool)
		for _, n := range defined(full) {
			carried[n] = true
		}
		for _, id := range luaIdent.FindAllString(luaCode(full+"\n"+string(src)), -1) {
			if lib[id] && !carried[id] {
				t.Errorf("%s names %s but does not carry it", e.Name(), id)
			}
		}
	}
}

// A script's prelude, above Mark, runs before the lib definitions; a
// script without the mark starts with them.
func TestWithLibPutsTheLibAtTheMark(t *testing.T) {
	lib := luaLibFor("wake(n)\n")
	if lib == "" {
		t.Fatal("no lib for wake")
	}
	if got, want := WithLib("if x then return 1 end\n"+Mark+"wake(n)\n"), "if x then return 1 end\n"+lib+"\nwake(n)\n"; got != want {
		t.Fatalf("with a prelude:\n%s\nwant:\n%s", got, want)
	}
	if got, want := WithLib("wake(n)\n"), lib+"\nwake(n)\n"; got != want {
		t.Fatalf("without a prelude:\n%s\nwant:\n%s", got, want)
	}
}
