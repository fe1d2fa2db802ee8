package integration_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	brokeriface "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// An operator deletes, archives or runs now a waiting task from another
// process: waiting on a deleted or archived task returns a failure saying
// so, a chord with a deleted member fails, and a task run now runs.
func TestOperatorActionsOnWaitingTasks(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		shared := sharedPair(t, p)
		sender, operator, workerSrv := bareServer(t, shared), bareServer(t, shared), bareServer(t, shared)
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
		if err := operator.DeleteTask(ctx, q, deleted.UUID); !errors.Is(err, brokeriface.ErrTaskNotFound) {
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
