package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/syncbuf"
)

// The worker and the producer run as the README says, each a process of
// its own, meeting on a real Redis: the producer prints the results the
// worker computed, and the worker, sent SIGTERM, stops and exits 0.
func TestProducerAndWorkerProcesses(t *testing.T) {
	bin := build(t)
	srv := redistest.Start(t)
	env := append(environWithout("BROKER", "RESULT_BACKEND"), "BROKER="+srv.URL(), "RESULT_BACKEND="+srv.URL())

	worker := exec.Command(filepath.Join(bin, "worker"))
	worker.Env = env
	logs := newWatcher("worker started")
	worker.Stdout, worker.Stderr = logs, logs
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = worker.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = worker.Process.Kill() // a worker that has exited is not killed
		<-exited
	})
	select {
	case <-logs.seen:
	case <-exited:
		t.Fatalf("the worker exited before it started (%v):\n%s", exitErr, logs)
	case <-time.After(time.Minute):
		t.Fatalf("the worker did not log %q within a minute:\n%s", logs.want, logs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	producer := exec.CommandContext(ctx, filepath.Join(bin, "producer"))
	producer.Env = env
	var producerErr syncbuf.Buffer
	producer.Stderr = &producerErr
	out, err := producer.Output()
	if err != nil {
		t.Fatalf("producer: %v\n%s\nworker:\n%s", err, &producerErr, logs)
	}
	if got, want := string(out), "add(1, 2) = 3\nmultiply(10, add(1, 1)) = 20\n"; got != want {
		t.Fatalf("producer printed\n%s\nwant\n%s", got, want)
	}

	if err := worker.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("the worker exited with %v after SIGTERM, want 0:\n%s", exitErr, logs)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the worker had not exited a minute after SIGTERM:\n%s", logs)
	}
}

// Without BROKER, both refuse to start, saying to set it to a Redis URL
// (not the in-process broker NewServer's own error suggests, which the
// other program could not reach).
func TestProgramsRefuseToRunWithoutBroker(t *testing.T) {
	bin := build(t)
	for _, name := range []string{"worker", "producer"} {
		cmd := exec.Command(filepath.Join(bin, name))
		cmd.Env = environWithout("BROKER", "RESULT_BACKEND")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "set BROKER") {
			t.Errorf("%s without BROKER: %v, %q; want exit status 1 saying to set BROKER", name, err, out)
		}
	}
}

var built struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

// build builds example/worker and example/producer (with -race when the
// test is) once for the test binary, and returns the directory holding them.
func build(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "machinist-example-")
		if built.err != nil {
			return
		}
		args := []string{"build", "-o", built.dir}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "../worker", ".")...)
		built.out, built.err = cmd.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// environWithout returns the test's environment without the variables
// named.
func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

// watcher collects a process's output and closes seen once the output
// holds want.
type watcher struct {
	syncbuf.Buffer
	want string
	once sync.Once
	seen chan struct{}
}

func newWatcher(want string) *watcher {
	return &watcher{want: want, seen: make(chan struct{})}
}

func (w *watcher) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if strings.Contains(w.Buffer.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}
