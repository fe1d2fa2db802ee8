package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/internal/clock"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A task whose lease is lost while it runs has its context cancelled, and
// whatever it returns is not recorded: no state, no settling call on the
// broker, no callback. The broker may already have given it to someone else.
func TestLeaseLostWhileRunning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		result     error
		retryCount int
	}{
		{name: "task succeeds", result: nil},
		{name: "task fails with retries left", result: errors.New("boom"), retryCount: 3},
		{name: "task fails for good", result: errors.New("boom")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &config.Config{
				LeaseDuration:      time.Second,
				LeaseRenewInterval: 20 * time.Millisecond,
				RecoverInterval:    time.Hour, // the broker never hands the task out again here
				ShutdownTimeout:    waitTimeout,
			})
			cancelled := make(chan error, 1)
			h.reg["hold"] = func(ctx context.Context) error {
				select {
				case <-ctx.Done():
				case <-t.Context().Done():
				}
				cancelled <- ctx.Err()
				return tc.result
			}
			sig := newSig("hold")
			sig.RetryCount = tc.retryCount
			sig.OnSuccess = []*tasks.Signature{newSig("on_success")}
			sig.OnError = []*tasks.Signature{newSig("on_error")}
			h.publish(sig)

			// The lease is lost once STARTED is written, not before: a
			// renewal that came first would cut that write short.
			losing := &losingBroker{LeaseBroker: h.spy, after: make(chan struct{})}
			p := h.params()
			p.Broker = losing
			r := h.start(p)
			waitFor(t, "STARTED", func() bool { return h.state(sig.UUID) == tasks.StateStarted })
			close(losing.after)

			if err := recv(t, cancelled, "the task's context to be cancelled"); !errors.Is(err, context.Canceled) {
				t.Fatalf("task context error = %v, want context.Canceled", err)
			}
			if err := r.stop(t); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			waitTasksDone(t, r.w)

			if losing.extends.Load() == 0 {
				t.Error("ExtendLeases was never called")
			}
			if got := h.state(sig.UUID); got != tasks.StateStarted {
				t.Errorf("state = %q, want %q (nothing written after the lease was lost)", got, tasks.StateStarted)
			}
			if c := h.spy.counts(); c.acks+c.retries+c.archives+c.requeued != 0 {
				t.Errorf("broker calls after the lease was lost: %d Ack, %d Retry, %d Archive, %d Requeue; want none",
					c.acks, c.retries, c.archives, c.requeued)
			}
			if sent := h.sent.all(); len(sent) != 0 {
				t.Errorf("SendFunc called %d times (first %q), want never", len(sent), sent[0].Name)
			}
			if errs := h.errs.all(); len(errs) != 0 {
				t.Errorf("ErrorHandlerFunc called with %v, want never", errs)
			}
		})
	}
}

// The heartbeat renews the lease of a task that runs longer than
// LeaseDuration, so the broker does not recover it and it runs once, to
// success.
func TestHeartbeatKeepsLongTaskLeased(t *testing.T) {
	t.Parallel()
	const runFor = 2500 * time.Millisecond
	h := newHarness(t, &config.Config{
		LeaseDuration:      time.Second,
		LeaseRenewInterval: 100 * time.Millisecond,
		RecoverInterval:    50 * time.Millisecond, // an expired lease is recovered at once
	})
	var runs atomic.Int32
	h.reg["long"] = func(ctx context.Context) (string, error) {
		runs.Add(1)
		timer := time.NewTimer(runFor)
		defer timer.Stop()
		select {
		case <-timer.C:
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	sig := newSig("long")
	h.publish(sig)
	r := h.start(h.params())

	waitFor(t, "the task to succeed", func() bool { return h.state(sig.UUID) == tasks.StateSuccess })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}

	if n := runs.Load(); n != 1 {
		t.Errorf("task ran %d times, want 1", n)
	}
	ds := h.spy.deliveries()
	if len(ds) != 1 {
		t.Fatalf("broker delivered the task %d times, want 1", len(ds))
	}
	if ds[0].Recovered != 0 {
		t.Errorf("Recovered = %d, want 0", ds[0].Recovered)
	}
	c := h.spy.counts()
	if c.acks != 1 {
		t.Errorf("Ack called %d times, want 1", c.acks)
	}
	// 2.5s at one renewal per 100ms: about 25; without renewal the lease
	// ends after 1s.
	if c.extends < 10 {
		t.Errorf("ExtendLeases called %d times in %s, want at least 10", c.extends, runFor)
	}
	if errs := h.errs.all(); len(errs) != 0 {
		t.Errorf("ErrorHandlerFunc called with %v", errs)
	}
}

// A graceful stop lets a running task finish within ShutdownTimeout.
func TestGracefulStopLetsRunningTaskFinish(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{ShutdownTimeout: waitTimeout})
	started := make(chan struct{})
	release := make(chan struct{})
	h.reg["slow"] = func(ctx context.Context) (string, error) {
		close(started)
		select {
		case <-release:
			return "finished", ctx.Err() // a cancelled context fails the task
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	sig := newSig("slow")
	h.publish(sig)
	p := h.params()
	p.Concurrency = 2 // a free slot keeps the fetch loop waiting in Fetch
	r := h.start(p)

	recv(t, started, "the task to start")
	waitFor(t, "the fetch loop to wait for more", func() bool { return h.spy.counts().fetches >= 2 })
	stopped := time.Now()
	r.cancel()
	recv(t, h.spy.fetchStopped, "the fetch loop to stop")
	close(release)
	if err := r.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if waited := time.Since(stopped); waited >= h.cnf.ShutdownTimeout {
		t.Errorf("Run returned %s after the stop, want before ShutdownTimeout (%s)", waited, h.cnf.ShutdownTimeout)
	}

	if got := h.state(sig.UUID); got != tasks.StateSuccess {
		t.Errorf("state = %q, want %q", got, tasks.StateSuccess)
	}
	c := h.spy.counts()
	if c.acks != 1 || c.requeued != 0 {
		t.Errorf("Ack called %d times and Requeue for %d tasks, want 1 and 0", c.acks, c.requeued)
	}
	if p := h.pending(); len(p) != 0 {
		t.Errorf("pending tasks = %v, want none", p)
	}
}

// A task still running ShutdownTimeout after a graceful stop has its context
// cancelled and is put back in its queue, and what it returns afterwards is
// not recorded.
func TestGracefulStopRequeuesTaskPastShutdownTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{ShutdownTimeout: 100 * time.Millisecond})
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	late := make(chan struct{})
	h.reg["stubborn"] = func(ctx context.Context) (string, error) {
		close(started)
		select {
		case <-ctx.Done():
		case <-t.Context().Done():
		}
		cancelled <- ctx.Err()
		select { // returns only when the test says so, after Run returned
		case <-late:
		case <-t.Context().Done():
		}
		return "late result", nil
	}
	sig := newSig("stubborn")
	sig.OnSuccess = []*tasks.Signature{newSig("on_success")}
	h.publish(sig)
	r := h.start(h.params())

	recv(t, started, "the task to start")
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if err := recv(t, cancelled, "the task's context to be cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("task context error = %v, want context.Canceled", err)
	}
	if p := h.pending(); !slices.Equal(p, []string{sig.UUID}) {
		t.Errorf("pending tasks = %v, want [%s]", p, sig.UUID)
	}
	if c := h.spy.counts(); c.requeued != 1 {
		t.Errorf("Requeue called for %d tasks, want 1", c.requeued)
	}

	close(late)
	waitTasksDone(t, r.w)
	if got := h.state(sig.UUID); got != tasks.StateStarted {
		t.Errorf("state = %q, want %q (the late result is not written)", got, tasks.StateStarted)
	}
	if c := h.spy.counts(); c.acks+c.retries+c.archives != 0 {
		t.Errorf("%d Ack, %d Retry, %d Archive after the task was requeued, want none", c.acks, c.retries, c.archives)
	}
	if sent := h.sent.all(); len(sent) != 0 {
		t.Errorf("SendFunc called %d times, want never", len(sent))
	}
	if p := h.pending(); !slices.Equal(p, []string{sig.UUID}) {
		t.Errorf("pending tasks after the late result = %v, want [%s]", p, sig.UUID)
	}
}

// Abort cancels running tasks at once, without waiting for ShutdownTimeout,
// puts them back in their queue and makes Run return ErrAborted.
func TestAbortCancelsAndRequeuesRunningTasks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{ShutdownTimeout: time.Minute})
	started := make(chan string, 2)
	cancelled := make(chan error, 2)
	h.reg["hold"] = func(ctx context.Context) error {
		started <- tasks.SignatureFromContext(ctx).UUID
		<-ctx.Done()
		cancelled <- ctx.Err()
		return ctx.Err()
	}
	sigs := []*tasks.Signature{newSig("hold"), newSig("hold")}
	for _, s := range sigs {
		s.OnError = []*tasks.Signature{newSig("on_error")}
	}
	h.publish(sigs...)
	p := h.params()
	p.Concurrency = 2
	r := h.start(p)
	recv(t, started, "the first task to start")
	recv(t, started, "the second task to start")

	r.w.Abort()
	r.w.Abort()
	// recv gives up after waitTimeout, well before ShutdownTimeout.
	if err := r.wait(t); !errors.Is(err, ErrAborted) {
		t.Fatalf("Run = %v, want ErrAborted", err)
	}
	for range sigs {
		if err := recv(t, cancelled, "a task's context to be cancelled"); !errors.Is(err, context.Canceled) {
			t.Errorf("task context error = %v, want context.Canceled", err)
		}
	}
	waitTasksDone(t, r.w)
	r.w.Abort() // after Run returned: still safe

	got := h.pending()
	slices.Sort(got)
	want := []string{sigs[0].UUID, sigs[1].UUID}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("pending tasks = %v, want %v", got, want)
	}
	// Abandoned tasks are not settled: no final state (STARTED only if
	// they ran StartedAfter before the abort).
	for _, s := range sigs {
		if st := h.state(s.UUID); st != tasks.StateStarted && st != tasks.StatePending {
			t.Errorf("state of %s = %q, want STARTED or PENDING (not settled)", s.UUID, st)
		}
	}
	if c := h.spy.counts(); c.requeued != 2 || c.acks+c.retries+c.archives != 0 {
		t.Errorf("Requeue for %d tasks, %d Ack, %d Retry, %d Archive; want 2 and none", c.requeued, c.acks, c.retries, c.archives)
	}
	if sent := h.sent.all(); len(sent) != 0 {
		t.Errorf("SendFunc called %d times, want never", len(sent))
	}
}

// Abort before Run, twice, makes Run return ErrAborted without taking a
// task: the queued task stays queued and never runs. Whether Run takes a
// task first is a race, so the test aborts and runs fresh workers many
// times; one that takes the task fails it.
func TestAbortBeforeRun(t *testing.T) {
	t.Parallel()
	const attempts = 50
	h := newHarness(t, &config.Config{ShutdownTimeout: time.Minute})
	var runs atomic.Int32
	h.reg["noop"] = func() error {
		runs.Add(1)
		return nil
	}
	sig := newSig("noop")
	h.publish(sig)

	for i := range attempts {
		w := New(h.params())
		w.Abort()
		w.Abort()
		done := make(chan error, 1)
		go func() { done <- w.Run(context.Background()) }()
		if err := recv(t, done, "Run to return"); !errors.Is(err, ErrAborted) {
			t.Fatalf("attempt %d: Run = %v, want ErrAborted", i+1, err)
		}
		waitTasksDone(t, w)
		if n := runs.Load(); n != 0 {
			t.Fatalf("attempt %d: a worker aborted before Run ran the task (state %q, %d Fetch calls so far)",
				i+1, h.state(sig.UUID), h.spy.counts().fetches)
		}
	}
	if p := h.pending(); !slices.Equal(p, []string{sig.UUID}) {
		t.Errorf("pending tasks = %v, want [%s]", p, sig.UUID)
	}
}

// A failing Fetch is retried with a growing backoff, each error reported to
// ErrorHandlerFunc, and the worker then runs tasks as usual.
func TestFetchErrorsAreRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	const fails = 3
	h := newHarness(t, &config.Config{})
	h.reg["ok"] = func() (string, error) { return "ok", nil }
	sig := newSig("ok")
	h.publish(sig)
	cause := errors.New("connection refused")
	failing := &failingFetchBroker{LeaseBroker: h.spy, err: cause, fails: fails}
	p := h.params()
	p.Broker = failing
	r := h.start(p)

	waitFor(t, "the task to succeed", func() bool { return h.state(sig.UUID) == tasks.StateSuccess })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}

	errs := h.errs.all()
	if len(errs) != fails {
		t.Fatalf("ErrorHandlerFunc called %d times (%v), want %d", len(errs), errs, fails)
	}
	for _, err := range errs {
		if !errors.Is(err, cause) {
			t.Errorf("ErrorHandlerFunc got %v, want an error wrapping %v", err, cause)
		}
	}
	calls := failing.callTimes()
	if len(calls) < fails+1 {
		t.Fatalf("Fetch called %d times, want at least %d", len(calls), fails+1)
	}
	for i := 0; i < fails; i++ { // backoff 50ms, 100ms, 200ms, less up to 20 % jitter
		min := (50 * time.Millisecond << i) * 8 / 10
		if gap := calls[i+1].Sub(calls[i]); gap < min {
			t.Errorf("Fetch call %d came %s after failure %d, want at least %s", i+2, gap, i+1, min)
		}
	}
	if c := h.spy.counts(); c.acks != 1 {
		t.Errorf("Ack called %d times, want 1", c.acks)
	}
}

// A broker closed under the worker ends Run with an error wrapping
// brokers.ErrClosed.
func TestFetchErrClosedEndsRun(t *testing.T) {
	t.Parallel()
	t.Run("Fetch returns a wrapped ErrClosed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &config.Config{})
		closed := &failingFetchBroker{LeaseBroker: h.spy, err: fmt.Errorf("redis: pool: %w", brokers.ErrClosed), fails: -1}
		p := h.params()
		p.Broker = closed
		r := h.start(p)
		if err := r.wait(t); !errors.Is(err, brokers.ErrClosed) {
			t.Fatalf("Run = %v, want an error wrapping ErrClosed", err)
		}
		if n := len(closed.callTimes()); n != 1 {
			t.Errorf("Fetch called %d times, want 1 (a closed broker is not retried)", n)
		}
	})
	t.Run("memory broker closed while Fetch waits", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &config.Config{})
		r := h.start(h.params())
		waitFor(t, "the worker to fetch", func() bool { return h.spy.counts().fetches >= 1 })
		if err := h.mem.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.wait(t); !errors.Is(err, brokers.ErrClosed) {
			t.Fatalf("Run = %v, want an error wrapping ErrClosed", err)
		}
	})
}

// The worker never runs more than Concurrency tasks, and never asks Fetch
// for more tasks than it has free slots.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	const concurrency, total = 3, 10
	h := newHarness(t, &config.Config{})
	h.spy.slots = concurrency
	var running, maxRunning atomic.Int32
	proceed := make(chan struct{})
	h.reg["work"] = func(ctx context.Context) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-proceed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for range total {
		h.publish(newSig("work"))
	}
	p := h.params()
	p.Concurrency = concurrency
	r := h.start(p)

	waitFor(t, "the slots to fill", func() bool { return running.Load() == concurrency })
	for i := range total {
		send(t, proceed, struct{}{}, fmt.Sprintf("task %d to be running", i+1))
	}
	waitFor(t, "every task to be acknowledged", func() bool { return h.spy.counts().acks == total })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}

	if m := maxRunning.Load(); m != concurrency {
		t.Errorf("at most %d tasks ran at once, want %d", m, concurrency)
	}
	h.spy.mu.Lock()
	defer h.spy.mu.Unlock()
	for _, v := range h.spy.overAsked {
		t.Errorf("asked for more than the free slots: %s", v)
	}
	if h.spy.fetchMaxes[0] != concurrency {
		t.Errorf("first Fetch asked for %d tasks, want %d (every slot free)", h.spy.fetchMaxes[0], concurrency)
	}
}

// Process runs a task without a delivery: it writes the states and sends
// callbacks and retries through SendFunc.
func TestProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("success sends OnSuccess with the results appended", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &config.Config{})
		h.reg["add"] = func(a, b int64) (int64, error) { return a + b, nil }
		sig := newSig("add", tasks.Arg{Type: "int64", Value: int64(2)}, tasks.Arg{Type: "int64", Value: int64(3)})
		next := newSig("print", tasks.Arg{Type: "string", Value: "sum"})
		fixed := newSig("fixed", tasks.Arg{Type: "string", Value: "as is"})
		fixed.Immutable = true
		sig.OnSuccess = []*tasks.Signature{next, fixed}

		if err := New(h.params()).Process(ctx, sig); err != nil {
			t.Fatalf("Process = %v", err)
		}
		st := h.stateOf(sig.UUID)
		if st == nil || st.State != tasks.StateSuccess {
			t.Fatalf("state = %+v, want SUCCESS", st)
		}
		if len(st.Results) != 1 || st.Results[0].Type != "int64" || fmt.Sprint(st.Results[0].Value) != "5" {
			t.Errorf("results = %v, want one int64 5", st.Results)
		}
		checkSentOnce(t, h, next.UUID, []tasks.Arg{{Type: "string", Value: "sum"}, {Type: "int64", Value: int64(5)}})
		checkSentOnce(t, h, fixed.UUID, []tasks.Arg{{Type: "string", Value: "as is"}})
		if n := len(h.sent.all()); n != 2 {
			t.Errorf("SendFunc called %d times, want 2", n)
		}
	})

	t.Run("RetryCount left sends the task again with an ETA", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &config.Config{})
		h.reg["flaky"] = func() error { return errors.New("try again") }
		sig := newSig("flaky")
		sig.RetryCount = 2
		sig.OnError = []*tasks.Signature{newSig("on_error")}

		before := time.Now()
		if err := New(h.params()).Process(ctx, sig); err != nil {
			t.Fatalf("Process = %v", err)
		}
		after := time.Now()
		if st := h.state(sig.UUID); st != tasks.StateRetry {
			t.Errorf("state = %q, want %q", st, tasks.StateRetry)
		}
		sent := h.sent.all()
		if len(sent) != 1 || sent[0].UUID != sig.UUID {
			t.Fatalf("SendFunc got %d signatures, want only the task itself again", len(sent))
		}
		again := sent[0]
		if again.RetryCount != 1 || again.RetryTimeout != 1 {
			t.Errorf("RetryCount, RetryTimeout = %d, %d; want 1, 1", again.RetryCount, again.RetryTimeout)
		}
		if again.ETA == nil || again.ETA.Before(before.Add(time.Second)) || again.ETA.After(after.Add(time.Second)) {
			t.Errorf("ETA = %v, want 1s after the run (%v .. %v)", again.ETA, before.Add(time.Second), after.Add(time.Second))
		}
		if errs := h.errs.all(); len(errs) != 0 {
			t.Errorf("ErrorHandlerFunc called with %v for a retry", errs)
		}
	})

	t.Run("failure sends OnError with the error prepended", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &config.Config{})
		h.reg["broken"] = func() error { return errors.New("disk full") }
		sig := newSig("broken")
		onError := newSig("alert", tasks.Arg{Type: "string", Value: "ops"})
		sig.OnError = []*tasks.Signature{onError}
		sig.OnSuccess = []*tasks.Signature{newSig("on_success")}

		if err := New(h.params()).Process(ctx, sig); err != nil {
			t.Fatalf("Process = %v", err)
		}
		st := h.stateOf(sig.UUID)
		if st == nil || st.State != tasks.StateFailure || st.Error != "disk full" {
			t.Errorf("state = %+v, want FAILURE with error %q", st, "disk full")
		}
		checkSentOnce(t, h, onError.UUID, []tasks.Arg{{Type: "string", Value: "disk full"}, {Type: "string", Value: "ops"}})
		if n := len(h.sent.all()); n != 1 {
			t.Errorf("SendFunc called %d times, want 1", n)
		}
		if errs := h.errs.all(); len(errs) != 1 || errs[0].Error() != "disk full" {
			t.Errorf("ErrorHandlerFunc got %v, want the task's error", errs)
		}
	})
}

// checkSentOnce checks that SendFunc was given the task id once, with args.
func checkSentOnce(t *testing.T, h *harness, id string, args []tasks.Arg) {
	t.Helper()
	sent := h.sent.withUUID(id)
	if len(sent) != 1 {
		t.Errorf("task %s sent %d times, want once", id, len(sent))
		return
	}
	if got, want := typedValues(sent[0].Args), typedValues(args); got != want {
		t.Errorf("task %s sent with args %s, want %s", id, got, want)
	}
}

// typedValues shows args as "type:value ...", so that values compare
// equal whatever Go type a store's decoding gave them (an int64 100 and a
// json.Number "100" are both "int64:100").
func typedValues(args []tasks.Arg) string {
	var b strings.Builder
	for _, a := range args {
		fmt.Fprintf(&b, "%s:%v ", a.Type, a.Value)
	}
	return b.String()
}

// A delivered task that fails with retries left, or with a Retriable error,
// is settled with Broker.Retry at the right time, with its signature
// updated.
func TestRetryThroughBroker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		err                    error
		retryCount, timeout    int
		wantIn                 time.Duration
		wantCount, wantTimeout int
	}{
		{
			name: "first retry of RetryCount after 1s", err: errors.New("boom"),
			retryCount: 2, timeout: 0, wantIn: time.Second, wantCount: 1, wantTimeout: 1,
		},
		{
			// docs/workflows.md's example: RetryTimeout 1 waits 2 s, then 3 s.
			name: "RetryTimeout 1: the first retry after 2s", err: errors.New("boom"),
			retryCount: 2, timeout: 1, wantIn: 2 * time.Second, wantCount: 1, wantTimeout: 2,
		},
		{
			name: "RetryTimeout follows Fibonacci: 3s then 5s", err: errors.New("boom"),
			retryCount: 1, timeout: 3, wantIn: 5 * time.Second, wantCount: 0, wantTimeout: 5,
		},
		{
			name: "wrapped ErrRetryTaskLater retries after RetryIn", err: fmt.Errorf("rate limited: %w", tasks.NewErrRetryTaskLater("busy", 3*time.Second)),
			retryCount: 2, timeout: 0, wantIn: 3 * time.Second, wantCount: 2, wantTimeout: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &config.Config{})
			returned := make(chan time.Time, 1)
			h.reg["failing"] = func() error {
				returned <- time.Now()
				return tc.err
			}
			sig := newSig("failing")
			sig.RetryCount, sig.RetryTimeout = tc.retryCount, tc.timeout
			sig.OnError = []*tasks.Signature{newSig("on_error")}
			h.publish(sig)
			r := h.start(h.params())

			waitFor(t, "Broker.Retry", func() bool { return h.spy.counts().retries >= 1 })
			if err := r.stop(t); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			returnedAt := recv(t, returned, "the task to run")

			calls := h.spy.retryCalls()
			if len(calls) != 1 {
				t.Fatalf("Retry called %d times, want 1", len(calls))
			}
			call := calls[0]
			if lo, hi := returnedAt.Add(tc.wantIn), call.calledAt.Add(tc.wantIn); call.at.Before(lo) || call.at.After(hi) {
				t.Errorf("retry at %v, want %s after the run (%v .. %v)", call.at, tc.wantIn, lo, hi)
			}
			if call.sig.RetryCount != tc.wantCount || call.sig.RetryTimeout != tc.wantTimeout {
				t.Errorf("delivered signature has RetryCount %d, RetryTimeout %d; want %d, %d",
					call.sig.RetryCount, call.sig.RetryTimeout, tc.wantCount, tc.wantTimeout)
			}
			if call.errMsg != tc.err.Error() {
				t.Errorf("Retry error message = %q, want %q", call.errMsg, tc.err.Error())
			}
			if st := h.state(sig.UUID); st != tasks.StateRetry {
				t.Errorf("state = %q, want %q", st, tasks.StateRetry)
			}
			infos, err := h.mem.ListTasks(context.Background(), testQueue, brokers.StatusRetry, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) == 0 && time.Now().After(call.at) {
				// Its retry came due on a slow machine: it waits in the queue.
				infos, err = h.mem.ListTasks(context.Background(), testQueue, brokers.StatusPending, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(infos) != 1 || infos[0].Signature.RetryCount != tc.wantCount || infos[0].Retried != 1 {
				t.Errorf("broker's retrying tasks = %+v, want the task with RetryCount %d, Retried 1", infos, tc.wantCount)
			}
			if c := h.spy.counts(); c.acks+c.archives != 0 {
				t.Errorf("%d Ack, %d Archive for a retried task", c.acks, c.archives)
			}
			if sent := h.sent.all(); len(sent) != 0 {
				t.Errorf("SendFunc called %d times for a retried task", len(sent))
			}
		})
	}
}

// chordFixture is a chord of three "member" tasks (member n returns
// (n+1)*100, or fails when n is failing) whose runs wait for their gate.
type chordFixture struct {
	h        *harness
	members  []*tasks.Signature
	callback *tasks.Signature
	onError  *tasks.Signature // the callback's OnError
	gates    []chan struct{}
}

func newChordFixture(t *testing.T, failing int64) *chordFixture {
	t.Helper()
	h := newHarness(t, &config.Config{})
	f := &chordFixture{h: h}
	for range 3 {
		f.gates = append(f.gates, make(chan struct{}))
	}
	h.reg["member"] = func(ctx context.Context, n int64) (int64, error) {
		select {
		case <-f.gates[n]:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if n == failing {
			return 0, fmt.Errorf("member %d broke", n)
		}
		return (n + 1) * 100, nil
	}
	for n := range int64(3) {
		f.members = append(f.members, newSig("member", tasks.Arg{Type: "int64", Value: n}))
	}
	group, err := tasks.NewGroup(f.members...)
	if err != nil {
		t.Fatal(err)
	}
	f.onError = newSig("chord_failed")
	f.callback = &tasks.Signature{Name: "sum", RoutingKey: testQueue, OnError: []*tasks.Signature{f.onError}}
	if _, err := tasks.NewChord(group, f.callback); err != nil {
		t.Fatal(err)
	}
	if err := h.backend.InitGroupContext(context.Background(), group.GroupUUID, group.GetUUIDs()); err != nil {
		t.Fatal(err)
	}
	h.publish(f.members...)
	return f
}

// finish lets member n run to its end and waits for its final state.
func (f *chordFixture) finish(t *testing.T, n int) {
	t.Helper()
	close(f.gates[n])
	id := f.members[n].UUID
	waitFor(t, fmt.Sprintf("member %d to finish", n), func() bool {
		st := f.h.state(id)
		return st == tasks.StateSuccess || st == tasks.StateFailure
	})
}

// A chord whose members all succeed sends its callback once, with the
// members' results in group order, whatever order they finished in.
func TestChordCallbackSentOnceInGroupOrder(t *testing.T) {
	t.Parallel()
	f := newChordFixture(t, -1)
	h := f.h
	p := h.params()
	p.Concurrency = 3
	r := h.start(p)

	for _, n := range []int{2, 1, 0} { // the reverse of group order
		f.finish(t, n)
	}
	waitFor(t, "every member to be acknowledged", func() bool { return h.spy.counts().acks == 3 })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}

	checkSentOnce(t, h, f.callback.UUID, []tasks.Arg{
		{Type: "int64", Value: int64(100)},
		{Type: "int64", Value: int64(200)},
		{Type: "int64", Value: int64(300)},
	})
	if n := len(h.sent.all()); n != 1 {
		t.Errorf("SendFunc called %d times, want once (the callback)", n)
	}
}

// A chord member that fails for good fails the callback: its state is
// FAILURE with the member's error, its OnError is sent once with that error
// prepended, and the callback itself is never sent.
func TestChordMemberFailureFailsCallback(t *testing.T) {
	t.Parallel()
	f := newChordFixture(t, 1)
	h := f.h
	p := h.params()
	p.Concurrency = 3
	r := h.start(p)

	f.finish(t, 1)
	f.finish(t, 0)
	f.finish(t, 2)
	waitFor(t, "every member to be settled", func() bool {
		c := h.spy.counts()
		return c.acks == 2 && c.archives == 1
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	checkChordFailed(t, f, "member 1 broke")
}

// As TestChordMemberFailureFailsCallback, when the failed member and the
// last successful one finish together: the failure is recorded first,
// completing the group, and the successful member reaches TriggerChord
// first. The chord still fails.
func TestChordMemberFailureRacingLastSuccess(t *testing.T) {
	t.Parallel()
	f := newChordFixture(t, 1)
	h := f.h
	held := &heldChordBackend{
		fullBackend: h.backend,
		hold:        f.members[1].UUID, // the failing member
		after:       f.members[2].UUID, // the last to succeed
		afterDone:   make(chan struct{}),
	}
	p := h.params()
	p.Concurrency = 3
	p.Backend = held
	r := h.start(p)

	f.finish(t, 0)
	f.finish(t, 1) // FAILURE written; its TriggerChord now waits for member 2's
	f.finish(t, 2)
	waitFor(t, "every member to be settled", func() bool {
		c := h.spy.counts()
		return c.acks == 2 && c.archives == 1
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	checkChordFailed(t, f, "member 1 broke")
}

// checkChordFailed checks the outcome of a chord whose member failed with
// msg.
func checkChordFailed(t *testing.T, f *chordFixture, msg string) {
	t.Helper()
	h := f.h
	st := h.stateOf(f.callback.UUID)
	if st == nil || st.State != tasks.StateFailure || !strings.Contains(st.Error, msg) {
		t.Errorf("callback state = %+v, want FAILURE with an error containing %q", st, msg)
	}
	sent := h.sent.withUUID(f.onError.UUID)
	if len(sent) != 1 {
		t.Errorf("callback's OnError sent %d times, want once", len(sent))
	} else if len(sent[0].Args) == 0 || sent[0].Args[0] != (tasks.Arg{Type: "string", Value: msg}) {
		t.Errorf("callback's OnError sent with args %v, want the error %q first", sent[0].Args, msg)
	}
	if n := len(h.sent.withUUID(f.callback.UUID)); n != 0 {
		t.Errorf("callback sent %d times, want never", n)
	}
}

// While PreConsumeFunc returns false the worker fetches nothing; it fetches
// again once it returns true.
func TestPreConsumeFuncGatesFetch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{Redis: &config.RedisConfig{NormalTasksPollPeriod: 5}})
	h.reg["ok"] = func() error { return nil }
	sig := newSig("ok")
	h.publish(sig) // pending from the start: any Fetch would take it
	var open atomic.Bool
	var asked atomic.Int32
	p := h.params()
	p.PreConsumeFunc = func() bool {
		asked.Add(1)
		return open.Load()
	}
	r := h.start(p)

	// The loop asks, is refused, waits and asks again: a Fetch after a
	// refusal would come before the next question.
	waitFor(t, "PreConsumeFunc to be asked three times", func() bool { return asked.Load() >= 3 })
	if n := h.spy.counts().fetches; n != 0 {
		t.Fatalf("Fetch called %d times while PreConsumeFunc returned false, want 0", n)
	}
	if st := h.state(sig.UUID); st != tasks.StatePending {
		t.Fatalf("state = %q while consuming is off, want %q", st, tasks.StatePending)
	}

	open.Store(true)
	waitFor(t, "the task to succeed", func() bool { return h.state(sig.UUID) == tasks.StateSuccess })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

// A fetch on an empty queue does not outlast the poll period: the gate is
// asked again, so a gate that closes while the worker waits keeps a task
// sent afterwards from being taken (machinery's test leaves a worker whose
// gate blocks; it must not go on taking tasks).
func TestPreConsumeFuncIsAskedWhileTheQueueIsEmpty(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{Redis: &config.RedisConfig{NormalTasksPollPeriod: 5}})
	h.reg["ok"] = func() error { return nil }
	var open atomic.Bool
	open.Store(true)
	var asked atomic.Int32
	p := h.params()
	p.PreConsumeFunc = func() bool {
		asked.Add(1)
		return open.Load()
	}
	r := h.start(p)
	waitFor(t, "PreConsumeFunc to be asked three times while the queue is empty", func() bool { return asked.Load() >= 3 })

	open.Store(false)
	seen := asked.Load()
	waitFor(t, "the closed gate to be asked twice", func() bool { return asked.Load() >= seen+2 })
	sig := newSig("ok")
	h.publish(sig)
	seen = asked.Load()
	waitFor(t, "the closed gate to be asked twice more", func() bool { return asked.Load() >= seen+2 })
	if st := h.state(sig.UUID); st != tasks.StatePending {
		t.Fatalf("state = %q after the gate closed, want %q", st, tasks.StatePending)
	}
	open.Store(true)
	waitFor(t, "the task to succeed", func() bool { return h.state(sig.UUID) == tasks.StateSuccess })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}

func TestFibonacciNext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want int }{
		{-1, 1}, {0, 1}, {1, 2}, {2, 3}, {3, 5}, {4, 5}, {5, 8}, {8, 13}, {13, 21},
	} {
		if got := fibonacciNext(tc.in); got != tc.want {
			t.Errorf("fibonacciNext(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// STARTED is written for a task that runs StartedAfter or longer, and never
// for one that ends sooner (its outcome follows at once). The worker's
// clock is a fake: the slow task moves it while it runs, the quick one
// does not, so the test does not depend on how fast the machine is.
func TestStartedOnlyForTasksThatRunAWhile(t *testing.T) {
	t.Parallel()
	cnf := (&config.Config{}).WithDefaults()
	broker := newEngineBroker(t, cnf)
	backend := &startedSpy{fullBackend: newEngineBackend(t, cnf)}
	t.Cleanup(func() { broker.Close(); backend.Close() })
	clk := clock.NewFake(time.Unix(0, 0))
	w := New(Params{Broker: broker, Backend: backend, Config: cnf, Clock: clk,
		SendFunc: func(context.Context, *tasks.Signature) error { return nil }})
	ctx := context.Background()
	quick := &tasks.Signature{UUID: "task_quick", Name: "quick"}
	if _, err, _ := w.run(ctx, quick, nil, func() error { return nil }, true, w.arch.Logger); err != nil {
		t.Fatal(err)
	}
	slow := &tasks.Signature{UUID: "task_slow", Name: "slow"}
	if _, err, _ := w.run(ctx, slow, nil, func() error { clk.Advance(2 * StartedAfter); return nil }, true, w.arch.Logger); err != nil {
		t.Fatal(err)
	}
	if got := backend.started(); len(got) != 1 || got[0] != "task_slow" {
		t.Fatalf("STARTED written for %v, want only task_slow", got)
	}
}

type startedSpy struct {
	fullBackend
	mu  sync.Mutex
	ids []string
}

func (s *startedSpy) SetStateStartedContext(ctx context.Context, sig *tasks.Signature) error {
	s.mu.Lock()
	s.ids = append(s.ids, sig.UUID)
	s.mu.Unlock()
	return s.fullBackend.SetStateStartedContext(ctx, sig)
}

func (s *startedSpy) started() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// A huge RetryTimeout or ErrRetryTaskLater delay is capped, computed in a
// few steps (machinery's loop never ended for math.MaxInt), and never
// overflows; a zero delay is raised to the floor.
func TestRetryDelayBounds(t *testing.T) {
	t.Parallel()
	limit := int(MaxRetryDelay / time.Second)
	for _, n := range []int{limit - 1, limit, math.MaxInt32, math.MaxInt} {
		if got := fibonacciNext(n); got != limit {
			t.Errorf("fibonacciNext(%d) = %d, want the cap %d", n, got, limit)
		}
	}
	for _, tc := range []struct{ in, want time.Duration }{
		{0, MinRetryDelay}, {-time.Hour, MinRetryDelay}, {time.Second, time.Second},
		{math.MaxInt64, MaxRetryDelay}, {time.Duration(limit) * time.Second * 2, MaxRetryDelay},
	} {
		if got := retryDelay(tc.in); got != tc.want {
			t.Errorf("retryDelay(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// A task that asks to be retried at once is retried after MinRetryDelay,
// on every broker: the worker does not spin on it.
func TestRetryNowWaitsForTheFloor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{})
	var runs atomic.Int32
	var mu sync.Mutex
	var asked []time.Time // when each run asked to be retried
	h.reg["again"] = func() error {
		if runs.Add(1) < 3 {
			mu.Lock()
			asked = append(asked, time.Now())
			mu.Unlock()
			return tasks.NewErrRetryTaskLater("not yet", 0)
		}
		return nil
	}
	sig := newSig("again")
	h.publish(sig)
	r := h.start(h.params())
	waitFor(t, "the task to succeed", func() bool { return h.state(sig.UUID) == tasks.StateSuccess })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	calls := h.spy.retryCalls()
	if len(calls) != 2 {
		t.Fatalf("%d retries, want 2", len(calls))
	}
	mu.Lock()
	defer mu.Unlock()
	for i, c := range calls {
		if d := c.at.Sub(asked[i]); d < MinRetryDelay {
			t.Errorf("retry scheduled %s after it was asked for, want at least MinRetryDelay %s", d, MinRetryDelay)
		}
	}
}
