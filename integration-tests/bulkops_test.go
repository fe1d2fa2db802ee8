package integration_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// An operator acts on all of a queue's tasks in one state, more than a
// page of them: scheduled tasks run now, retrying ones archived (waiting
// on each returns the reason), archived ones requeued, pending ones
// deleted (waiting on each returns a failure saying so); a chord whose
// members are deleted fails rather than waits.
func TestOperatorActionsOnAllTasks(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 2)
		sender, operator := s[0], s[1]
		ctx := testCtx(t)
		q := config.DefaultQueueName
		// A page and then some; on the in-process engine, whose scripts
		// run many times slower under -race, fewer than its page of 200:
		// one page (the store's tests page 100,000 tasks on Redis).
		n := 1100
		if p.name == "memory" {
			n = 40
		}
		later := time.Now().Add(time.Hour)
		send := func(eta *time.Time) []*result.AsyncResult {
			sigs := make([]*tasks.Signature, n)
			for i := range sigs {
				sigs[i] = sig("add", i64(1), i64(2))
				sigs[i].ETA = eta
			}
			rs, err := sender.SendTasks(ctx, sigs)
			if err != nil {
				t.Fatal(err)
			}
			return rs
		}
		count := func(status brokers.TaskStatus) int {
			t.Helper()
			infos, err := operator.GetBroker().(brokers.Inspector).QueueInfo(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := infos.Count(status)
			return c
		}
		want := func(what string, got int, err error, n int) {
			t.Helper()
			if err != nil || got != n {
				t.Fatalf("%s: %d tasks, %v; want %d", what, got, err, n)
			}
		}

		send(&later)
		got, err := operator.RunAllTasks(ctx, q, brokers.StatusScheduled)
		want("run all scheduled", got, err, n)
		if c := count(brokers.StatusPending); c != n {
			t.Fatalf("%d pending after running all scheduled, want %d", c, n)
		}
		got, err = operator.ArchiveAllTasks(ctx, q, brokers.StatusPending, "bulk archived")
		want("archive all pending", got, err, n)
		got, err = operator.RunAllTasks(ctx, q, brokers.StatusArchived)
		want("requeue all archived", got, err, n)
		got, err = operator.DeleteAllTasks(ctx, q, brokers.StatusPending)
		want("delete all pending", got, err, n)
		if c := count(brokers.StatusPending) + count(brokers.StatusArchived) + count(brokers.StatusScheduled); c != 0 {
			t.Fatalf("%d tasks left, want none", c)
		}

		rs := send(nil)
		got, err = operator.ArchiveAllTasks(ctx, q, brokers.StatusPending, "bulk archived")
		want("archive all pending", got, err, n)
		for _, i := range []int{0, n / 2, n - 1} {
			if _, err := rs[i].GetWithContext(ctx, poll); err == nil || !strings.Contains(err.Error(), "bulk archived") {
				t.Fatalf("waiting on task %d, archived in bulk: %v, want a failure with the reason", i, err)
			}
		}
		got, err = operator.DeleteAllTasks(ctx, q, brokers.StatusArchived)
		want("delete all archived", got, err, n)

		// A chord whose members are all deleted fails.
		group, err := tasks.NewGroup(sig("add", i64(1), i64(1)), sig("add", i64(2), i64(2)))
		if err != nil {
			t.Fatal(err)
		}
		chord, err := tasks.NewChord(group, sig("add"))
		if err != nil {
			t.Fatal(err)
		}
		cr, err := sender.SendChordWithContext(ctx, chord, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err = operator.DeleteAllTasks(ctx, q, brokers.StatusPending)
		want("delete the chord's members", got, err, 2)
		if _, err := cr.GetWithContext(ctx, poll); err == nil {
			t.Fatal("a chord whose members were deleted succeeded")
		}

		if _, err := operator.RunAllTasks(ctx, q, brokers.StatusPending); !errors.Is(err, brokers.ErrBadTakeAll) {
			t.Fatalf("run all pending: %v, want ErrBadTakeAll", err)
		}
	})
}

// A queue that holds tasks is removed only when forced: its tasks are
// deleted first (waiting on one returns the failure), then its keys, and
// it is no longer listed.
func TestRemoveQueue(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		ctx := testCtx(t)
		const q = "to_remove"
		later := time.Now().Add(time.Hour)
		pending, scheduled := sig("add", i64(1), i64(2)), sig("add", i64(3), i64(4))
		pending.RoutingKey, scheduled.RoutingKey, scheduled.ETA = q, q, &later
		rp, err := s.SendTaskWithContext(ctx, pending)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SendTaskWithContext(ctx, scheduled); err != nil {
			t.Fatal(err)
		}
		insp := s.GetBroker().(brokers.Inspector)
		if err := s.RemoveQueue(ctx, q, false); !errors.Is(err, brokers.ErrQueueNotEmpty) {
			t.Fatalf("removing a queue with tasks: %v, want ErrQueueNotEmpty", err)
		}
		if err := s.RemoveQueue(ctx, q, true); err != nil {
			t.Fatal(err)
		}
		if _, err := rp.GetWithContext(ctx, poll); err == nil || !strings.Contains(err.Error(), "deleted by an operator") {
			t.Fatalf("waiting on a task of the removed queue: %v, want a failure saying it was deleted", err)
		}
		queues, err := insp.Queues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range queues {
			if name == q {
				t.Fatalf("the removed queue is still listed: %q", queues)
			}
		}
		if info, err := insp.QueueInfo(ctx, q); err != nil || info.Pending+info.Scheduled+info.Archived != 0 {
			t.Fatalf("the removed queue: %+v, %v; want nothing in it", info, err)
		}
	})
}

// With a completed retention, the tasks that succeeded are counted and
// listed, newest first, while they are kept.
func TestCompletedTasksListed(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p, func(c *config.Config) { c.CompletedRetention = time.Hour })
		must(t, s.RegisterTasks(map[string]interface{}{"add": func(a, b int64) (int64, error) { return a + b, nil }}))
		launch(t, s.NewWorker("w", 1))
		ctx := testCtx(t)
		var uuids []string
		for i := range 3 {
			r, err := s.SendTaskWithContext(ctx, sig("add", i64(int64(i)), i64(1)))
			must(t, err)
			_, err = r.GetWithContext(ctx, poll)
			must(t, err)
			uuids = append(uuids, r.Signature.UUID)
		}
		insp := s.GetBroker().(brokers.Inspector)
		q := config.DefaultQueueName
		waitFor(t, "the three tasks counted as completed", func() bool {
			info, err := insp.QueueInfo(ctx, q)
			must(t, err)
			return info.Completed == 3
		})
		infos, err := insp.ListTasks(ctx, q, brokers.StatusCompleted, 0, 10)
		must(t, err)
		if len(infos) != 3 || infos[0].Signature.UUID != uuids[2] || infos[2].Signature.UUID != uuids[0] || infos[0].Status != brokers.StatusCompleted {
			got := make([]string, len(infos))
			for i, in := range infos {
				got[i] = in.Signature.UUID
			}
			t.Fatalf("completed tasks listed: %q, want %q newest first", got, uuids)
		}
	})
}
