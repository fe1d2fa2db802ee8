package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestCheckpointsAndStepsSurviveRetries: a task that checkpoints, runs a
// step and fails twice resumes from its last checkpoint on each retry,
// gets the step's kept result without running it again, and sees the
// same idempotency key in every attempt.
func TestCheckpointsAndStepsSurviveRetries(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		var charges atomic.Int32
		var mu sync.Mutex
		keys := map[string]bool{}
		if err := e.server.RegisterTask("resumable", func(ctx context.Context) (string, error) {
			var done int
			if _, err := tasks.LoadCheckpoint(ctx, &done); err != nil {
				return "", err
			}
			mu.Lock()
			keys[tasks.IdempotencyKey(ctx, "charge")] = true
			mu.Unlock()
			receipt, err := tasks.Step(ctx, "charge", func() (string, error) {
				return fmt.Sprintf("receipt-%d", charges.Add(1)), nil
			})
			if err != nil {
				return "", err
			}
			if done < 2 {
				if err := tasks.Checkpoint(ctx, done+1); err != nil {
					return "", err
				}
				return "", tasks.NewErrRetryTaskLater("not yet", 20*time.Millisecond)
			}
			return fmt.Sprintf("resumed at %d with %s", done, receipt), nil
		}); err != nil {
			t.Fatal(err)
		}
		res, err := e.server.SendTaskWithContext(e.ctx(), sig("resumable"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := res.GetWithContext(e.ctx(), poll)
		if got := values(out); err != nil || len(got) != 1 || got[0] != "resumed at 2 with receipt-1" {
			t.Fatalf("result %v, %v; want [resumed at 2 with receipt-1]", got, err)
		}
		if n := charges.Load(); n != 1 {
			t.Fatalf("the step ran %d times over 3 attempts, want once", n)
		}
		if len(keys) != 1 {
			t.Fatalf("idempotency keys %v, want one for every attempt", keys)
		}
	})
}

// TestProgressWhileRunningAndAfter: the progress a running task reports
// is read from another process while it runs, and its last one from its
// final state once it has finished.
func TestProgressWhileRunningAndAfter(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 2, func(c *config.Config) { c.NoUnixSignals = true })
		sender, workerSrv := s[0], s[1]
		release := make(chan struct{})
		if err := workerSrv.RegisterTask("long", func(ctx context.Context) error {
			if err := tasks.SetProgress(ctx, tasks.Progress{Done: 5, Total: 10, Message: "halfway"}); err != nil {
				return err
			}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return tasks.SetProgress(ctx, tasks.Progress{Done: 10, Total: 10, Message: "done"})
		}); err != nil {
			t.Fatal(err)
		}
		launch(t, workerSrv.NewWorker("w", 2))
		ctx := testCtx(t)
		res, err := sender.SendTaskWithContext(ctx, &tasks.Signature{Name: "long"})
		if err != nil {
			t.Fatal(err)
		}
		var last *tasks.Progress
		waitFor(t, "the running task's progress", func() bool {
			last, err = res.Progress(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return last != nil
		})
		if last.Done != 5 || last.Total != 10 || last.Message != "halfway" || last.At.IsZero() {
			t.Fatalf("progress while running %+v, want 5 of 10, halfway, with its time", last)
		}
		// The running task's state carries it too, once it has one
		// (STARTED, a millisecond into the run).
		waitFor(t, "the running task's state with its progress", func() bool {
			st := res.GetState()
			return st.State == tasks.StateStarted && st.Progress != nil && st.Progress.Done == 5
		})
		close(release)
		if _, err := res.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		if last, err = res.Progress(ctx); err != nil || last == nil || last.Done != 10 || last.Message != "done" {
			t.Fatalf("progress once finished %+v, %v; want 10 of 10, done", last, err)
		}
	})
}

// TestRuntimeOutsideATask: the functions refuse a context that is not a
// running task's, and a checkpoint over the cap is refused before
// anything is written.
func TestRuntimeOutsideATask(t *testing.T) {
	ctx := context.Background()
	if err := tasks.SetProgress(ctx, tasks.Progress{}); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatalf("SetProgress: %v", err)
	}
	if err := tasks.Checkpoint(ctx, 1); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatalf("Checkpoint: %v", err)
	}
	if _, err := tasks.Step(ctx, "s", func() (int, error) { return 1, nil }); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatalf("Step: %v", err)
	}
	if k := tasks.IdempotencyKey(ctx, "s"); k != "" {
		t.Fatalf("IdempotencyKey: %q", k)
	}
}

// TestCheckpointTooLarge: a checkpoint over MaxDataSize fails the call
// with ErrDataTooLarge, and the task can go on.
func TestCheckpointTooLarge(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		if err := e.server.RegisterTask("big_checkpoint", func(ctx context.Context) (bool, error) {
			err := tasks.Checkpoint(ctx, make([]byte, tasks.MaxDataSize))
			return errors.Is(err, tasks.ErrDataTooLarge), nil
		}); err != nil {
			t.Fatal(err)
		}
		res, err := e.server.SendTaskWithContext(e.ctx(), sig("big_checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := res.GetWithContext(e.ctx(), poll)
		if got := values(out); err != nil || len(got) != 1 || got[0] != true {
			t.Fatalf("result %v, %v; want [true]", got, err)
		}
	})
}

// TestWatchFromTheStart: a reader that starts after the task has run
// reads its stream from the start: what it emitted in each attempt,
// marked with the attempt, its progress, then its final state.
func TestWatchFromTheStart(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		var runs atomic.Int32
		if err := e.server.RegisterTask("tokens", func(ctx context.Context) (string, error) {
			n := runs.Add(1)
			if err := tasks.Emit(ctx, fmt.Sprintf("attempt %d", n)); err != nil {
				return "", err
			}
			if n == 1 {
				return "", tasks.NewErrRetryTaskLater("again", 20*time.Millisecond)
			}
			for _, tok := range []string{"to", "ken", "s"} {
				if err := tasks.Emit(ctx, tok); err != nil {
					return "", err
				}
			}
			return "tokens", tasks.SetProgress(ctx, tasks.Progress{Done: 1, Total: 1})
		}); err != nil {
			t.Fatal(err)
		}
		res, err := e.server.SendTaskWithContext(e.ctx(), sig("tokens"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.GetWithContext(e.ctx(), poll); err != nil {
			t.Fatal(err)
		}
		var got []string
		for ev, err := range res.Watch(e.ctx(), "") {
			if err != nil {
				t.Fatal(err)
			}
			switch ev.Kind {
			case "data":
				got = append(got, fmt.Sprintf("%d:%s", ev.Attempt, ev.Data))
			case "state":
				got = append(got, "state:"+string(ev.Data))
			}
		}
		want := []string{`1:"attempt 1"`, `2:"attempt 2"`, `2:"to"`, `2:"ken"`, `2:"s"`, `state:{"error":"","state":"SUCCESS"}`}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}

// TestWatchWhileRunning: a reader following a running task sees what it
// emits before it finishes, and the end.
func TestWatchWhileRunning(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 2, func(c *config.Config) { c.NoUnixSignals = true })
		sender, workerSrv := s[0], s[1]
		seen := make(chan struct{})
		if err := workerSrv.RegisterTask("chatty", func(ctx context.Context) error {
			if err := tasks.Emit(ctx, "first"); err != nil {
				return err
			}
			select {
			case <-seen:
			case <-ctx.Done():
				return ctx.Err()
			}
			return tasks.Emit(ctx, "second")
		}); err != nil {
			t.Fatal(err)
		}
		launch(t, workerSrv.NewWorker("w", 2))
		ctx := testCtx(t)
		res, err := sender.SendTaskWithContext(ctx, &tasks.Signature{Name: "chatty"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for ev, err := range res.Watch(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.Kind+":"+string(ev.Data))
			if string(ev.Data) == `"first"` {
				close(seen) // the task goes on only once the reader saw it
			}
		}
		want := []string{`data:"first"`, `data:"second"`, `state:{"error":"","state":"SUCCESS"}`}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}
