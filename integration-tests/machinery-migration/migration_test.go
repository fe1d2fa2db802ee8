// Package migration tests machinist's migration mode against real
// machinery v1, taken from the Go module proxy: machinery programs send,
// machinist workers (beside machinery's own) run the tasks, and
// machinery's results return what they computed.
package migration

import (
	"bufio"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mach "github.com/RichardKnop/machinery/v1"
	mconfig "github.com/RichardKnop/machinery/v1/config"
	mlog "github.com/RichardKnop/machinery/v1/log"
	mtasks "github.com/RichardKnop/machinery/v1/tasks"

	machinist "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

const queue = "machinery_tasks"

// startRedis starts a redis-server of the test's own on a free port and
// returns its URL.
func startRedis(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v (make test installs it)", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.Contains(s.Text(), "Ready to accept connections") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("redis-server did not start")
	}
	return fmt.Sprintf("redis://127.0.0.1:%d", port)
}

// machineryServer is a machinery v1 Server on url, configured as its
// documentation shows.
func machineryServer(t *testing.T, url string) *mach.Server {
	t.Helper()
	quiet := stdlog.New(io.Discard, "", 0)
	mlog.Set(quiet)
	s, err := mach.NewServer(&mconfig.Config{
		Broker: url, ResultBackend: url, DefaultQueue: queue, ResultsExpireIn: 3600,
		Redis: &mconfig.RedisConfig{
			MaxIdle: 10, MaxActive: 100, IdleTimeout: 300, Wait: true,
			ReadTimeout: 15, WriteTimeout: 15, ConnectTimeout: 15,
			NormalTasksPollPeriod: 100, DelayedTasksPollPeriod: 20,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// machinistServer is a machinist Server in the migration mode on url.
func machinistServer(t *testing.T, url string) *machinist.Server {
	t.Helper()
	s, err := machinist.NewServer(&config.Config{
		Broker: url, DefaultQueue: queue, MachineryBroker: url, NoUnixSignals: true,
		Logger: slog.New(slog.DiscardHandler),
		Redis:  &config.RedisConfig{NormalTasksPollPeriod: 50, DelayedTasksPollPeriod: 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func add(a, b int64) (int64, error) { return a + b, nil }

func sum(ns ...int64) (int64, error) {
	var t int64
	for _, n := range ns {
		t += n
	}
	return t, nil
}

func margs(ns ...int64) []mtasks.Arg {
	var args []mtasks.Arg
	for _, n := range ns {
		args = append(args, mtasks.Arg{Type: "int64", Value: n})
	}
	return args
}

// machinery sends; only a machinist worker in the migration mode runs;
// machinery's results return the values, for a task, a chain, a chord, a
// task with an ETA and a task retried from machinist's side.
func TestMachinerySendsMachinistRuns(t *testing.T) {
	url := startRedis(t)
	sender := machineryServer(t, url)
	for name, fn := range map[string]any{"add": add, "sum": sum} {
		// machinery's Server checks the names of callbacks it sends.
		if err := sender.RegisterTask(name, fn); err != nil {
			t.Fatal(err)
		}
	}
	s := machinistServer(t, url)
	var flaky atomic.Int64
	for name, fn := range map[string]any{
		"add": add, "sum": sum,
		"now": func() (int64, error) { return time.Now().UnixNano(), nil }, // when it ran
		"flaky": func() (string, error) {
			if flaky.Add(1) == 1 {
				return "", tasks.NewErrRetryTaskLater("not yet", 50*time.Millisecond)
			}
			return "done", nil
		},
	} {
		if err := s.RegisterTask(name, fn); err != nil {
			t.Fatal(err)
		}
	}
	w := s.NewWorker("machinist", 4)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	defer func() {
		w.Quit()
		if err := <-errs; err != nil {
			t.Errorf("machinist worker: %v", err)
		}
	}()
	const timeout, poll = 30 * time.Second, 5 * time.Millisecond

	r, err := sender.SendTask(&mtasks.Signature{Name: "add", Args: margs(1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.GetWithTimeout(timeout, poll)
	if err != nil || len(got) != 1 || got[0].Interface() != int64(3) {
		t.Fatalf("task: %v, %v; want 3", got, err)
	}

	chain, err := mtasks.NewChain(
		&mtasks.Signature{Name: "add", Args: margs(1, 2)},
		&mtasks.Signature{Name: "add", Args: margs(10)},
		&mtasks.Signature{Name: "add", Args: margs(100)})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := sender.SendChain(chain)
	if err != nil {
		t.Fatal(err)
	}
	got, err = cr.GetWithTimeout(timeout, poll)
	if err != nil || len(got) != 1 || got[0].Interface() != int64(113) {
		t.Fatalf("chain: %v, %v; want 113", got, err)
	}

	group, err := mtasks.NewGroup(
		&mtasks.Signature{Name: "add", Args: margs(1, 1)},
		&mtasks.Signature{Name: "add", Args: margs(2, 2)},
		&mtasks.Signature{Name: "add", Args: margs(3, 3)})
	if err != nil {
		t.Fatal(err)
	}
	chord, err := mtasks.NewChord(group, &mtasks.Signature{Name: "sum"})
	if err != nil {
		t.Fatal(err)
	}
	chr, err := sender.SendChord(chord, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err = chr.GetWithTimeout(timeout, poll)
	if err != nil || len(got) != 1 || got[0].Interface() != int64(12) {
		t.Fatalf("chord: %v, %v; want 12", got, err)
	}

	eta := time.Now().Add(200 * time.Millisecond)
	er, err := sender.SendTask(&mtasks.Signature{Name: "now", ETA: &eta})
	if err != nil {
		t.Fatal(err)
	}
	got, err = er.GetWithTimeout(timeout, poll)
	if err != nil || len(got) != 1 {
		t.Fatalf("task with an ETA: %v, %v", got, err)
	}
	if ran := time.Unix(0, got[0].Interface().(int64)); ran.Before(eta) {
		t.Fatalf("the task with an ETA ran at %v, %v before it", ran, eta.Sub(ran))
	}

	fr, err := sender.SendTask(&mtasks.Signature{Name: "flaky"})
	if err != nil {
		t.Fatal(err)
	}
	got, err = fr.GetWithTimeout(timeout, poll)
	if err != nil || len(got) != 1 || got[0].Interface() != "done" {
		t.Fatalf("retried task: %v, %v; want done", got, err)
	}
	if n := flaky.Load(); n != 2 {
		t.Fatalf("the retried task ran %d times; want 2", n)
	}
}

// A fleet half migrated: a machinery worker and a machinist worker in the
// migration mode consume the same queue. The chords' members run on
// either (the split is logged), and each chord's callback runs once,
// elected under machinery's own lock by whichever side finishes last.
func TestMachineryAndMachinistWorkersShareAQueue(t *testing.T) {
	url := startRedis(t)
	var mu sync.Mutex
	callbacks := map[int64]int{} // by chord: its sum, distinct per chord
	ranOn := map[string]int{}    // tasks by side
	record := func(side string) func(a, b int64) (int64, error) {
		return func(a, b int64) (int64, error) {
			mu.Lock()
			ranOn[side]++
			mu.Unlock()
			return a + b, nil
		}
	}

	sender := machineryServer(t, url)
	mw := machineryServer(t, url)
	s := machinistServer(t, url)
	cb := func(ns ...int64) (int64, error) {
		mu.Lock()
		total, err := sum(ns...)
		callbacks[total]++
		mu.Unlock()
		return total, err
	}
	for _, reg := range []func(string, any) error{sender.RegisterTask, mw.RegisterTask} {
		if err := reg("sum", cb); err != nil {
			t.Fatal(err)
		}
	}
	if err := sender.RegisterTask("add", record("sender")); err != nil {
		t.Fatal(err)
	}
	if err := mw.RegisterTask("add", record("machinery")); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterTask("add", record("machinist")); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterTask("sum", cb); err != nil {
		t.Fatal(err)
	}
	mworker := mw.NewWorker("machinery", 2)
	merrs := make(chan error, 1)
	mworker.LaunchAsync(merrs)
	w := s.NewWorker("machinist", 2)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)

	const chords, members = 20, 5
	var results []*struct {
		want int64
		get  func() (int64, error)
	}
	for c := 0; c < chords; c++ {
		var sigs []*mtasks.Signature
		var want int64
		for m := 0; m < members; m++ {
			sigs = append(sigs, &mtasks.Signature{Name: "add", Args: margs(int64(c), int64(m))})
			want += int64(c + m)
		}
		group, err := mtasks.NewGroup(sigs...)
		if err != nil {
			t.Fatal(err)
		}
		chord, err := mtasks.NewChord(group, &mtasks.Signature{Name: "sum"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := sender.SendChord(chord, 0)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, &struct {
			want int64
			get  func() (int64, error)
		}{want, func() (int64, error) {
			got, err := r.GetWithTimeout(60*time.Second, 5*time.Millisecond)
			if err != nil {
				return 0, err
			}
			return got[0].Interface().(int64), nil
		}})
	}
	for i, r := range results {
		got, err := r.get()
		if err != nil || got != r.want {
			t.Fatalf("chord %d: %v, %v; want %d", i, got, err, r.want)
		}
	}
	w.Quit()
	if err := <-errs; err != nil {
		t.Errorf("machinist worker: %v", err)
	}
	mworker.Quit()
	<-merrs

	mu.Lock()
	defer mu.Unlock()
	for c := range int64(chords) {
		if n := callbacks[members*c+members*(members-1)/2]; n != 1 {
			t.Errorf("chord %d's callback ran %d times; want once", c, n)
		}
	}
	if ranOn["machinery"]+ranOn["machinist"] != chords*members {
		t.Errorf("members ran %v; want %d between the two workers", ranOn, chords*members)
	}
	t.Logf("members run by each side: %v", ranOn)
}
