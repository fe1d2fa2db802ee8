package main

import (
	"testing"
)

// The example runs end to end, worker and sender in one process, on the
// in-process broker.
func TestExampleRunsInOneProcess(t *testing.T) {
	t.Setenv("BROKER", "memory://")
	t.Setenv("RESULT_BACKEND", "memory://")
	t.Setenv("NO_UNIX_SIGNALS", "true")
	server, err := startServer("")
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if err := both(server); err != nil {
		t.Fatal(err)
	}
}
