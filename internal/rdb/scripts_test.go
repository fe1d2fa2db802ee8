package rdb

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/b6192125/machinist/internal/redistest"
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
	want := "limit_parse limit_queue limit_unpark limit_free free_unique release_holds forget"
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
	ents, err := luaFiles.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		src, err := luaFiles.ReadFile("lua/" + e.Name())
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

// TestDequeueWakesNamesItLeavesBehind: a fetch that stops in a rerouted
// list (it popped its most ids: gone ones here) leaves a wake-up on the
// names' notify list, so that the caller's kind takes the rest at once
// rather than after a block timeout; so does one that stops with another
// name's list untouched.
func TestDequeueWakesNamesItLeavesBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	k := &keys{prefix: strings.TrimSuffix(srv.Prefix(t), ":")}
	qk := k.queue("q")
	names := qk.names + "digest"
	notify := names + ":notify"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dequeue := func() []dequeued {
		t.Helper()
		v, err := dequeueScript.Run(ctx, client, []string{qk.pending, qk.paused, qk.lease, qk.notify, qk.rerouted, names},
			qk.task, 1, 60000, "tok").Result()
		must(err)
		taken, err := parseDequeueReply(v, 1)
		must(err)
		return taken
	}
	must(client.SAdd(ctx, names, "x", "y").Err())
	must(client.SAdd(ctx, qk.rerouted, "x").Err())
	for i := 0; i < 17; i++ { // ids whose tasks are gone: skipped
		must(client.RPush(ctx, qk.rerouted+":x", fmt.Sprintf("gone%d", i)).Err())
	}
	must(client.RPush(ctx, qk.rerouted+":x", "a").Err())
	must(client.HSet(ctx, qk.task+"a", "msg", `{"UUID":"a","Name":"x"}`, "state", "pending", "rerouted", "x").Err())
	if taken := dequeue(); len(taken) != 0 {
		t.Fatalf("the fetch that popped its most ids took %+v", taken)
	}
	if n := client.LLen(ctx, notify).Val(); n != 1 {
		t.Fatalf("names' notify list has %d tokens after a fetch left tasks of its names, want 1", n)
	}
	must(client.Del(ctx, notify).Err())

	must(client.SAdd(ctx, qk.rerouted, "y").Err())
	must(client.RPush(ctx, qk.rerouted+":y", "b").Err())
	must(client.HSet(ctx, qk.task+"b", "msg", `{"UUID":"b","Name":"y"}`, "state", "pending", "rerouted", "y").Err())
	if taken := dequeue(); len(taken) != 1 {
		t.Fatalf("the fetch took %d tasks, want 1", len(taken))
	}
	if n := client.LLen(ctx, notify).Val(); n != 1 {
		t.Fatalf("names' notify list has %d tokens after a fetch left another name's task, want 1", n)
	}
}

// A script's prelude, above libMark, runs before the lib definitions; a
// script without the mark starts with them.
func TestWithLibPutsTheLibAtTheMark(t *testing.T) {
	lib := luaLibFor("wake(n)\n")
	if lib == "" {
		t.Fatal("no lib for wake")
	}
	if got, want := withLib("if x then return 1 end\n"+libMark+"wake(n)\n"), "if x then return 1 end\n"+lib+"\nwake(n)\n"; got != want {
		t.Fatalf("with a prelude:\n%s\nwant:\n%s", got, want)
	}
	if got, want := withLib("wake(n)\n"), lib+"\nwake(n)\n"; got != want {
		t.Fatalf("without a prelude:\n%s\nwant:\n%s", got, want)
	}
}
