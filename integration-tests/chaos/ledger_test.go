package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// The ledger's work: every send is a chain of two tasks, "chaos.work" then
// "chaos.after". A run of work records its start and its end on the
// witness (a Redis no fault touches) and returns a run id of its own; after
// receives that id as its last argument (the chain passes results on),
// records it and returns it. So the witness shows every run, and a callback
// sent by a holder whose run was not the one settled carries another id.
const (
	workTask  = "chaos.work"
	afterTask = "chaos.after"

	// childEnv, when set to "<witness url>|<witness key>|<who>|<concurrency>",
	// turns the test binary into a worker process (startProcess): its
	// configuration comes from the environment (BROKER, RESULT_BACKEND, …).
	childEnv = "MACHINIST_CHAOS_CHILD"

	// workRetries is each work task's RetryCount: a run that fails (its
	// witness write did) is retried, not lost.
	workRetries = 3
)

// ledger sends work and checks, at the end, what happened to each send.
type ledger struct {
	witness *goredis.Client
	key     string // the witness list

	// WorkTime is how long each run of work takes. It does not watch its
	// context: it finishes, and tries to settle, even after its worker lost
	// the lease, as a task that ignores cancellation does.
	WorkTime time.Duration
	// SendTimeout, when not 0, is the deadline of each send: a send
	// gives up then, whatever Redis does.
	SendTimeout time.Duration

	next atomic.Int64

	mu    sync.Mutex
	sends []*sent
}

// sent is one send and its reported outcome.
type sent struct {
	work, after *tasks.Signature
	err         error
}

// newLedger returns a ledger whose witness is a key of the test's own on
// the shared Redis.
func newLedger(t *testing.T) *ledger {
	t.Helper()
	srv := redistest.Shared(t)
	return &ledger{
		witness:  srv.Client(t),
		key:      srv.Prefix(t) + "runs",
		WorkTime: 5 * time.Millisecond,
	}
}

// newServer returns a Server with broker and backend on the Redis at url,
// the ledger's tasks registered as who, its log in a file shown if the test
// fails; it is closed when the test ends. mutate may change the
// configuration first.
func (l *ledger) newServer(t *testing.T, url, who string, mutate ...func(*config.Config)) *machinery.Server {
	t.Helper()
	cnf := &config.Config{
		Broker:        url,
		ResultBackend: url,
		NoUnixSignals: true,
		Redis:         &config.RedisConfig{},
		Logger:        slog.New(slog.NewTextHandler(logFile(t, who+".log"), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, m := range mutate {
		m(cnf)
	}
	s, err := machinery.NewServer(cnf)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := register(s, l.witness, l.key, who); err != nil {
		t.Fatal(err)
	}
	return s
}

// logFile creates name in the test's temporary directory and shows its
// last lines if the test fails.
func logFile(t *testing.T, name string) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Close()
		if t.Failed() {
			t.Logf("--- %s ---\n%s", name, tail(path, 4000))
		}
	})
	return f
}

// tail returns the last n bytes of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// register registers the ledger's tasks on s, recording on the witness
// list key as who.
func register(s *machinery.Server, witness goredis.UniversalClient, key, who string) error {
	record := func(ctx context.Context, fields ...string) error {
		entry := strings.Join(append(fields, strconv.FormatInt(time.Now().UnixMilli(), 10)), "|")
		// A run whose context ended still records what it did.
		return witness.RPush(context.WithoutCancel(ctx), key, entry).Err()
	}
	return s.RegisterTasks(map[string]interface{}{
		workTask: func(ctx context.Context, n, ms int64) (string, error) {
			id := tasks.SignatureFromContext(ctx).UUID
			run := who + "-" + randomHex(4)
			if err := record(ctx, "start", id, run); err != nil {
				return "", err
			}
			time.Sleep(time.Duration(ms) * time.Millisecond)
			if err := record(ctx, "done", id, run); err != nil {
				return "", err
			}
			return run, nil
		},
		afterTask: func(ctx context.Context, n int64, parentRun string) (string, error) {
			id := tasks.SignatureFromContext(ctx).UUID
			if err := record(ctx, "after", id, parentRun+"@"+who); err != nil {
				return "", err
			}
			return parentRun, nil
		},
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startWorker launches a worker of s in this process and returns a
// function that stops it (also called when the test ends).
func (l *ledger) startWorker(t *testing.T, s *machinery.Server, concurrency int) (stop func()) {
	t.Helper()
	w := s.NewWorker("chaos", concurrency)
	w.SetErrorHandler(func(error) {}) // failures show in the invariants
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			w.Quit()
			if err := <-errs; err != nil && !errors.Is(err, machinery.ErrWorkerQuitGracefully) {
				t.Errorf("worker stopped with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// send sends one chain, work then after, and records its outcome.
func (l *ledger) send(ctx context.Context, s *machinery.Server) error {
	n := l.next.Add(1)
	work := &tasks.Signature{Name: workTask, RetryCount: workRetries, Args: []tasks.Arg{
		{Type: "int64", Value: n}, {Type: "int64", Value: l.WorkTime.Milliseconds()},
	}}
	after := &tasks.Signature{Name: afterTask, Args: []tasks.Arg{{Type: "int64", Value: n}}}
	chain, err := tasks.NewChain(work, after)
	if err != nil {
		return err
	}
	if l.SendTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.SendTimeout)
		defer cancel()
	}
	_, err = s.SendChainWithContext(ctx, chain)
	l.mu.Lock()
	l.sends = append(l.sends, &sent{work: work, after: after, err: err})
	l.mu.Unlock()
	return err
}

// sendEvery sends a chain every interval, with ctx, until the returned
// function is called; that function waits for the send under way to
// return (it is not cancelled: its outcome counts like any other).
func (l *ledger) sendEvery(ctx context.Context, s *machinery.Server, interval time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for ctx.Err() == nil {
			_ = l.send(ctx, s)
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-done
		})
	}
}

// counts returns how many sends were accepted and how many failed so far.
func (l *ledger) counts() (accepted, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sends {
		if s.err == nil {
			accepted++
		} else {
			failed++
		}
	}
	return accepted, failed
}

// waitAccepted waits until n more sends have been accepted, failing the
// test after timeout with how many failed meanwhile and the last error.
func (l *ledger) waitAccepted(t *testing.T, n int, timeout time.Duration, when string) {
	t.Helper()
	from, failedFrom := l.counts()
	deadline := time.Now().Add(timeout)
	for {
		accepted, failed := l.counts()
		if accepted >= from+n {
			return
		}
		if time.Now().After(deadline) {
			l.mu.Lock()
			last := l.sends[len(l.sends)-1].err
			l.mu.Unlock()
			t.Fatalf("%d sends accepted and %d failed in the %v %s, want %d accepted; the last send returned: %v",
				accepted-from, failed-failedFrom, timeout, when, n, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// firstCallbackAfter returns how long after since the first chain finished
// (its second task ran), or a note that none did.
func (l *ledger) firstCallbackAfter(t *testing.T, ctx context.Context, since time.Time) string {
	t.Helper()
	// The witness is read even when ctx ran out waiting for the chains.
	_, after, _ := l.witnessed(t, context.WithoutCancel(ctx))
	var first time.Time
	for _, runs := range after {
		for _, r := range runs {
			if !r.started.Before(since) && (first.IsZero() || r.started.Before(first)) {
				first = r.started
			}
		}
	}
	if first.IsZero() {
		return "(none finished)"
	}
	// The witness keeps milliseconds.
	return max(first.Sub(since), 0).Round(time.Millisecond).String()
}

// run is one run of a task, from the witness.
type run struct {
	id      string // the run id (work) or the parent run id received (after)
	started time.Time
	done    time.Time // zero if the run did not finish
}

// witnessed reads the witness: work runs and after runs, by task UUID.
func (l *ledger) witnessed(t *testing.T, ctx context.Context) (work, after map[string][]*run, last time.Time) {
	t.Helper()
	entries, err := l.witness.LRange(ctx, l.key, 0, -1).Result()
	if err != nil {
		t.Fatalf("read the witness: %v", err)
	}
	work, after = map[string][]*run{}, map[string][]*run{}
	for _, e := range entries {
		f := strings.Split(e, "|")
		if len(f) != 4 {
			t.Fatalf("malformed witness entry %q", e)
		}
		ms, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			t.Fatalf("malformed witness entry %q", e)
		}
		at := time.UnixMilli(ms)
		kind, id, runID := f[0], f[1], f[2]
		switch kind {
		case "start":
			work[id] = append(work[id], &run{id: runID, started: at})
		case "done":
			i := slices.IndexFunc(work[id], func(r *run) bool { return r.id == runID })
			if i < 0 {
				t.Fatalf("witness entry %q: no start before it", e)
			}
			work[id][i].done = at
		case "after":
			parent, _, _ := strings.Cut(runID, "@")
			after[id] = append(after[id], &run{id: parent, started: at, done: at})
			if at.After(last) {
				last = at
			}
		default:
			t.Fatalf("malformed witness entry %q", e)
		}
	}
	return work, after, last
}

// report is what a ledger found: the figures of docs/reliability.md.
type report struct {
	Accepted     int // sends that returned without error
	Failed       int // sends that returned an error
	FailedButRan int // of those, sends whose work ran all the same (the error said it might)
	Lost         int // accepted sends whose chain did not finish
	Runs         int // finished runs of work
	Duplicated   int // finished runs of work beyond one per task
	CallbackDups int // runs of after beyond one per task
	// Finished is when the last callback ran: the time to recover is
	// Finished less the end of the fault.
	Finished time.Time
}

func (r report) String() string {
	return fmt.Sprintf("accepted %d, sends failed %d (%d of them ran: the error said it might), lost %d, runs %d (%d duplicated, callbacks %d duplicated)",
		r.Accepted, r.Failed, r.FailedButRan, r.Lost, r.Runs, r.Duplicated, r.CallbackDups)
}

// since returns how long after t the last callback ran.
func (r report) since(t time.Time) time.Duration {
	return r.Finished.Sub(t).Round(10 * time.Millisecond)
}

// verify waits (until ctx ends) for every accepted send's chain to finish,
// then checks the invariants, failing the test for each violation, and
// returns the figures. Call it after the sending and the faults have
// stopped, with workers running.
func (l *ledger) verify(t *testing.T, ctx context.Context, s *machinery.Server) report {
	t.Helper()
	l.mu.Lock()
	sends := slices.Clone(l.sends)
	l.mu.Unlock()
	var rep report
	backend := s.GetBackend()

	finalResult := func(sig *tasks.Signature) (string, string) {
		// A context of its own: ctx may have run out waiting.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		st, err := backend.(backends.ContextBackend).GetStateContext(ctx, sig.UUID)
		if err != nil {
			return "", err.Error()
		}
		if st.State != tasks.StateSuccess || len(st.Results) != 1 {
			return "", fmt.Sprintf("state %s, error %q, results %v", st.State, st.Error, st.Results)
		}
		v, _ := st.Results[0].Value.(string)
		return v, ""
	}

	// Wait for every accepted chain: its after task's state.
	for _, snd := range sends {
		if snd.err != nil {
			continue
		}
		rep.Accepted++
		_, err := result.NewAsyncResult(snd.after, backend).GetWithContext(ctx, 20*time.Millisecond)
		if err != nil && ctx.Err() != nil {
			// The wait ran out on an earlier chain: look at this one's
			// state as it is, without waiting.
			if _, why := finalResult(snd.after); why == "" {
				err = nil
			}
		}
		if err != nil {
			rep.Lost++
			if rep.Lost <= 5 {
				t.Errorf("lost: chain %s → %s was accepted but did not finish: %v", snd.work.UUID, snd.after.UUID, err)
			}
		}
	}
	if rep.Lost > 5 {
		t.Errorf("… %d accepted chains lost in all", rep.Lost)
	}

	work, after, finished := l.witnessed(t, context.WithoutCancel(ctx))
	rep.Finished = finished
	violations := 0
	violate := func(format string, args ...any) {
		violations++
		if violations <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, snd := range sends {
		runs := work[snd.work.UUID]
		finished := 0
		for _, r := range runs {
			if !r.done.IsZero() {
				finished++
			}
		}
		if snd.err != nil {
			rep.Failed++
			if rep.Failed <= 3 {
				t.Logf("send failed: %v", snd.err)
			}
			if !saysOutcome(snd.err) {
				violate("send of %s returned %q, an error that does not say whether it may have happened", snd.work.UUID, snd.err)
			}
			if len(runs) > 0 {
				rep.FailedButRan++
				if !mayHaveRun(snd.err) {
					violate("send of %s returned %q, an error that says it did not happen, but it ran %d times", snd.work.UUID, snd.err, len(runs))
				}
			}
			continue
		}
		rep.Runs += finished
		if finished > 1 {
			rep.Duplicated += finished - 1
		}
		if n := len(after[snd.after.UUID]); n > 1 {
			rep.CallbackDups += n - 1
		}
		kept, why := finalResult(snd.work)
		if why != "" {
			if rep.Lost == 0 {
				violate("chain %s finished but its first task's state is wrong: %s", snd.work.UUID, why)
			}
			continue
		}
		// The result kept is that of a run that finished.
		if !slices.ContainsFunc(runs, func(r *run) bool { return r.id == kept && !r.done.IsZero() }) {
			violate("task %s keeps result %q, which no finished run returned (runs %v)", snd.work.UUID, kept, runIDs(runs))
		}
		// Every callback carries the result kept: a callback sent by
		// another run (a stale holder) or a result written after the
		// callback was sent shows here.
		for _, a := range after[snd.after.UUID] {
			if a.id != kept {
				violate("task %s keeps result %q, but its callback %s ran with %q: settled by two holders (runs %v)",
					snd.work.UUID, kept, snd.after.UUID, a.id, runIDs(runs))
			}
		}
		if got, why := finalResult(snd.after); why == "" && got != kept {
			violate("callback %s returned %q, but task %s keeps %q", snd.after.UUID, got, snd.work.UUID, kept)
		}
	}
	if violations > 10 {
		t.Errorf("… %d violations in all", violations)
	}

	if rep.Accepted == 0 {
		t.Error("no send was accepted: the test tested nothing")
	}
	return rep
}

// mayHaveRun reports whether a send's error says the send may have
// happened (machinist.ErrMaybeSent): a request went out and its reply
// never came. One that says it did not (machinist.ErrNotSent) must not
// run.
func mayHaveRun(err error) bool {
	return errors.Is(err, machinery.ErrMaybeSent)
}

// saysOutcome reports whether a send's error says exactly one of
// machinist.ErrNotSent and machinist.ErrMaybeSent.
func saysOutcome(err error) bool {
	return errors.Is(err, machinery.ErrNotSent) != errors.Is(err, machinery.ErrMaybeSent)
}

func runIDs(runs []*run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.id
		if r.done.IsZero() {
			ids[i] += " (unfinished)"
		}
	}
	return ids
}

// process is a worker process: this test binary again, in child mode.
type process struct {
	who    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // set before exited is closed
}

// startProcess starts a worker process named who with concurrency
// goroutines. Its configuration comes from env ("BROKER=…",
// "RESULT_BACKEND=…", "LEASE_DURATION=2s", …; see config.NewFromEnvironment);
// it handles SIGTERM and SIGINT as a machinery worker does. It is killed
// when the test ends, and its output shown if the test failed.
func (l *ledger) startProcess(t *testing.T, who string, concurrency int, env ...string) *process {
	t.Helper()
	mode := fmt.Sprintf("%s=%s|%s|%s|%d", childEnv, "redis://"+l.witness.Options().Addr, l.key, who, concurrency)
	return spawn(t, who, append([]string{mode}, env...)...)
}

// spawn starts the test binary as the child process who, with env added to
// this process's environment (the first entry selects the child's mode).
// It is killed when the test ends, and its output shown if the test failed.
func spawn(t *testing.T, who string, env ...string) *process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := logFile(t, who+".log")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker process %s: %v", who, err)
	}
	p := &process{who: who, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// signal sends sig to the process, failing the test if it has exited.
func (p *process) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("worker process %s exited before %v: %v", p.who, sig, p.err)
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("worker process %s: %v: %v", p.who, sig, err)
	}
}

// Pause stops the process (SIGSTOP), as a long GC pause, a frozen VM or a
// debugger would.
func (p *process) Pause(t *testing.T) { t.Helper(); p.signal(t, syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *process) Resume(t *testing.T) { t.Helper(); p.signal(t, syscall.SIGCONT) }

// Kill kills the process (SIGKILL) and waits for it to exit.
func (p *process) Kill(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGKILL)
	<-p.exited
}

// Stop asks the process to stop (SIGTERM: the worker finishes what it
// runs) and waits for it to exit, failing the test if it does not exit
// cleanly within timeout.
func (p *process) Stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	p.signal(t, syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			t.Errorf("worker process %s exited with %v after SIGTERM", p.who, p.err)
		}
	case <-time.After(timeout):
		t.Fatalf("worker process %s still running %v after SIGTERM", p.who, timeout)
	}
}

// runChild runs a worker process for the spec in childEnv until it is
// stopped by a signal, then exits: 0 after a graceful stop.
func runChild(spec string) {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "chaos worker: "+format+"\n", args...)
		os.Exit(2)
	}
	f := strings.Split(spec, "|")
	if len(f) != 4 {
		fail("%s=%q: want <witness url>|<witness key>|<who>|<concurrency>", childEnv, spec)
	}
	witnessURL, key, who := f[0], f[1], f[2]
	concurrency, err := strconv.Atoi(f[3])
	if err != nil {
		fail("concurrency: %v", err)
	}
	cnf, err := config.NewFromEnvironment()
	if err != nil {
		fail("config: %v", err)
	}
	cnf.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	server, err := machinery.NewServer(cnf)
	if err != nil {
		fail("NewServer: %v", err)
	}
	opts, err := goredis.ParseURL(witnessURL)
	if err != nil {
		fail("witness %s: %v", witnessURL, err)
	}
	if err := register(server, goredis.NewClient(opts), key, who); err != nil {
		fail("register: %v", err)
	}
	w := server.NewWorker(who, concurrency)
	w.SetErrorHandler(func(error) {})
	err = w.Launch() // returns on SIGTERM or SIGINT
	if err != nil && !errors.Is(err, machinery.ErrWorkerQuitGracefully) {
		fail("worker stopped: %v", err)
	}
	os.Exit(0)
}
