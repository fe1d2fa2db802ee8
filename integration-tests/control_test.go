package integration_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// An operator deletes, archives or runs now a waiting task from another
// process: waiting on a deleted or archived task returns a failure saying
// so, a chord with a deleted member fails, and a task run now runs.
func TestOperatorActionsOnWaitingTasks(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 3)
		sender, operator, workerSrv := s[0], s[1], s[2]
		if err := workerSrv.RegisterTasks(map[string]interface{}{
			"add": func(a, b int64) (int64, error) { return a + b, nil },
			"sum": func(xs ...int64) (int64, error) { return int64(len(xs)), nil },
		}); err != nil {
			t.Fatal(err)
		}
		launch(t, workerSrv.NewWorker("w", 2))
		ctx := testCtx(t)
		q := config.DefaultQueueName
		later := time.Now().Add(time.Hour)
		scheduled := func() *tasks.Signature {
			s := sig("add", i64(1), i64(2))
			s.ETA = &later
			return s
		}

		deleted, archived, runNow := scheduled(), scheduled(), scheduled()
		rd, err := sender.SendTaskWithContext(ctx, deleted)
		if err != nil {
			t.Fatal(err)
		}
		ra, err := sender.SendTaskWithContext(ctx, archived)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := sender.SendTaskWithContext(ctx, runNow)
		if err != nil {
			t.Fatal(err)
		}
		if err := operator.DeleteTask(ctx, q, deleted.UUID); err != nil {
			t.Fatal(err)
		}
		if _, err := rd.GetWithContext(ctx, poll); err == nil || !strings.Contains(err.Error(), "deleted by an operator") {
			t.Fatalf("waiting on a deleted task: %v, want a failure saying it was deleted", err)
		}
		if err := operator.ArchiveTask(ctx, q, archived.UUID, "bad input, archived for later"); err != nil {
			t.Fatal(err)
		}
		if _, err := ra.GetWithContext(ctx, poll); err == nil || !strings.Contains(err.Error(), "bad input, archived for later") {
			t.Fatalf("waiting on an archived task: %v, want a failure with the reason", err)
		}
		if err := operator.RunTaskNow(ctx, q, runNow.UUID); err != nil {
			t.Fatal(err)
		}
		if out, err := rr.GetWithContext(ctx, poll); err != nil || out[0].Int() != 3 {
			t.Fatalf("a task run now: %v, %v; want 3", out, err)
		}
		if err := operator.DeleteTask(ctx, q, deleted.UUID); !errors.Is(err, brokers.ErrTaskNotFound) {
			t.Fatalf("deleting a deleted task: %v, want ErrTaskNotFound", err)
		}

		// A chord whose member is deleted fails instead of waiting forever.
		member := scheduled()
		group, err := tasks.NewGroup(sig("add", i64(1), i64(1)), member)
		if err != nil {
			t.Fatal(err)
		}
		chord, err := tasks.NewChord(group, sig("sum"))
		if err != nil {
			t.Fatal(err)
		}
		cr, err := sender.SendChordWithContext(ctx, chord, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := operator.DeleteTask(ctx, q, member.UUID); err != nil {
			t.Fatal(err)
		}
		if _, err := cr.GetWithContext(ctx, poll); err == nil || !strings.Contains(err.Error(), "deleted by an operator") {
			t.Fatalf("waiting on a chord with a deleted member: %v, want its failure", err)
		}
	})
}

// A running task cancelled from another process stops at once (its
// context ends; here well before any lease renewal could tell it), is not
// retried, and waiting on it returns tasks.ErrTaskCancelled; its OnError
// callbacks are sent only when asked. A waiting task cancelled never runs;
// a finished one is left as it is.
func TestCancelTask(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 3, func(c *config.Config) {
			c.LeaseDuration = time.Minute
			c.LeaseRenewInterval = 30 * time.Second
		})
		sender, operator, workerSrv := s[0], s[1], s[2]
		started := make(chan string, 4)
		stopped := make(chan time.Time, 4)
		var runs atomic.Int32
		if err := workerSrv.RegisterTasks(map[string]interface{}{
			"hold": func(ctx context.Context) error {
				runs.Add(1)
				started <- tasks.SignatureFromContext(ctx).UUID
				<-ctx.Done()
				stopped <- time.Now()
				return ctx.Err()
			},
			"on_error": func(msg string) error { return nil },
			"add":      func(a, b int64) (int64, error) { return a + b, nil },
		}); err != nil {
			t.Fatal(err)
		}
		launch(t, workerSrv.NewWorker("w", 2))
		ctx := testCtx(t)
		q := config.DefaultQueueName
		for _, withOnError := range []bool{false, true} {
			s := sig("hold")
			s.RetryCount = 3
			onError := sig("on_error")
			s.OnError = []*tasks.Signature{onError}
			r, err := sender.SendTaskWithContext(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := recvString(t, started); got != s.UUID {
				t.Fatalf("started %s, want %s", got, s.UUID)
			}
			var opts []machinery.CancelOption
			if withOnError {
				opts = append(opts, machinery.WithOnError())
			}
			cancelled := time.Now()
			if err := operator.CancelTask(ctx, q, s.UUID, opts...); err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-stopped:
				t.Logf("the task's context ended %v after CancelTask returned", at.Sub(cancelled))
			case <-time.After(10 * time.Second):
				t.Fatal("the cancelled task's context did not end (lease renewals are 30 s apart)")
			}
			if _, err := r.GetWithContext(ctx, poll); !errors.Is(err, tasks.ErrTaskCancelled) {
				t.Fatalf("waiting on a cancelled task: %v, want ErrTaskCancelled", err)
			}
			_, err = sender.GetBackend().(backends.ContextBackend).GetStateContext(ctx, onError.UUID)
			switch {
			case withOnError && err != nil:
				t.Fatalf("OnError callback asked for: its state: %v", err)
			case !withOnError && !errors.Is(err, backends.ErrStateNotFound):
				t.Fatalf("OnError callback not asked for, but its state is there (%v)", err)
			}
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("hold ran %d times, want 2 (no retry after a cancel)", n)
		}
		// Both are archived, neither waits for a retry.
		in := operator.GetBroker().(brokers.Inspector)
		info, err := in.QueueInfo(ctx, q)
		if err != nil || info.Retry != 0 || info.Archived != 2 {
			t.Fatalf("queue after cancelling two running tasks: %+v, %v; want 2 archived, none to retry", info, err)
		}

		// Waiting: never runs.
		later := time.Now().Add(time.Hour)
		waiting := sig("add", i64(1), i64(2))
		waiting.ETA = &later
		rw, err := sender.SendTaskWithContext(ctx, waiting)
		if err != nil {
			t.Fatal(err)
		}
		if err := operator.CancelTask(ctx, q, waiting.UUID); err != nil {
			t.Fatal(err)
		}
		if _, err := rw.GetWithContext(ctx, poll); !errors.Is(err, tasks.ErrTaskCancelled) {
			t.Fatalf("waiting on a cancelled scheduled task: %v, want ErrTaskCancelled", err)
		}
		// Finished: left alone.
		done := sig("add", i64(1), i64(2))
		rd, err := sender.SendTaskWithContext(ctx, done)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rd.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the finished task to leave its queue", func() bool {
			err := operator.CancelTask(ctx, q, done.UUID)
			return errors.Is(err, machinery.ErrTaskFinished)
		})
	})
}

func recvString(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(waitTimeout):
		t.Fatal("nothing received")
		return ""
	}
}
