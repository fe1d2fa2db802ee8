package integration_test

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/ops"
	storepair "github.com/b6192125/machinist/internal/pair"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// What an operator sees (the command's and the dashboard's data) of work
// run by a worker in another process: workflows as graphs with each
// task's state, a running task with the worker that holds it, the worker
// from its heartbeats, the queues' counts, and the operator's actions.
func TestOperatorView(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		ss := processes(t, p, 2)
		sender, runner := ss[0], ss[1]
		ctx := testCtx(t)
		release := make(chan struct{})
		defer func() {
			select {
			case <-release:
			default:
				close(release)
			}
		}()
		must(t, runner.RegisterTasks(map[string]interface{}{
			"add":  func(a, b int64) (int64, error) { return a + b, nil },
			"fail": func() error { return errors.New("disk full") },
			"sum":  func(xs ...int64) (int64, error) { return 0, nil },
			"hold": func() error { <-release; return nil },
		}))
		stop := launch(t, runner.NewQueuesWorker("ops-worker", 4, map[string]int{"qa": 1, "qb": 1}, false))

		// A chord over two queues whose second member fails; a chord on
		// one queue with a member that sends a task when it succeeds; a
		// chain.
		mixed := chord(t, sender, "sum",
			&tasks.Signature{Name: "add", RoutingKey: "qa", Args: []tasks.Arg{i64(1), i64(2)}},
			&tasks.Signature{Name: "fail", RoutingKey: "qb"})
		after := &tasks.Signature{Name: "add", RoutingKey: "qa", Args: []tasks.Arg{i64(5)}}
		shared := chord(t, sender, "sum",
			&tasks.Signature{Name: "add", RoutingKey: "qa", Args: []tasks.Arg{i64(1), i64(2)}, OnSuccess: []*tasks.Signature{after}},
			&tasks.Signature{Name: "add", RoutingKey: "qa", Args: []tasks.Arg{i64(3), i64(4)}})
		chain, err := tasks.NewChain(
			&tasks.Signature{Name: "add", RoutingKey: "qa", Args: []tasks.Arg{i64(1), i64(1)}},
			&tasks.Signature{Name: "add", RoutingKey: "qb", Args: []tasks.Arg{i64(1)}},
			&tasks.Signature{Name: "add", RoutingKey: "qa", Args: []tasks.Arg{i64(1)}},
		)
		must(t, err)
		chainResult, err := sender.SendChainWithContext(ctx, chain)
		must(t, err)
		if _, err := chainResult.GetWithTimeout(waitTimeout, poll); err != nil {
			t.Fatalf("chain: %v", err)
		}
		hold := &tasks.Signature{Name: "hold", RoutingKey: "qa"}
		_, err = sender.SendTaskWithContext(ctx, hold)
		must(t, err)

		o, err := ops.New(storepair.New(sender.GetBroker(), sender.GetBackend(), nil), sender)
		must(t, err)
		for _, id := range []string{mixed.GroupUUID, shared.GroupUUID} {
			waitFor(t, "the chord's callback to finish", func() bool {
				wf, err := o.Workflow(ctx, id, 0, 0)
				return err == nil && wf.Root.Next != nil && wf.Root.Next[0].State != "" && wf.Root.Next[0].State != tasks.StatePending
			})
		}

		// The mixed chord: two members in group order, the callback after
		// the group, failed with the member's error.
		wf, err := o.Workflow(ctx, member(mixed, 1), 0, 0)
		must(t, err)
		if wf.ID != mixed.GroupUUID || wf.Kind != tasks.WorkflowChord || wf.State != tasks.StateFailure || !wf.Root.Group ||
			len(wf.Root.Members) != 2 || len(wf.Root.Next) != 1 {
			t.Fatalf("mixed chord: %+v", wf)
		}
		m0, m1, cb := wf.Root.Members[0], wf.Root.Members[1], wf.Root.Next[0]
		if m0.State != tasks.StateSuccess || m1.State != tasks.StateFailure || m1.Error != "disk full" || m1.Queue != "qb" ||
			cb.UUID != mixed.Callback.UUID || cb.State != tasks.StateFailure || wf.Counts[tasks.StateFailure] != 2 {
			t.Fatalf("mixed chord's tasks: %+v, %+v, callback %+v, counts %v", m0, m1, cb, wf.Counts)
		}

		// The chord on one queue: its members from the group's
		// bookkeeping, the task a member sends under it.
		waitFor(t, "the member's OnSuccess task to finish", func() bool {
			st, err := sender.GetBackend().(backends.ContextBackend).GetStateContext(ctx, after.UUID)
			return err == nil && st.IsCompleted()
		})
		wf, err = o.Workflow(ctx, shared.GroupUUID, 0, 0)
		must(t, err)
		if wf.State != tasks.StateSuccess || len(wf.Root.Members) != 2 || len(wf.Root.Next) != 1 {
			t.Fatalf("chord on one queue: %+v", wf)
		}
		if first := wf.Root.Members[0]; first.Name != "add" || len(first.Next) != 1 || first.Next[0].UUID != after.UUID ||
			first.Next[0].State != tasks.StateSuccess {
			t.Fatalf("chord on one queue: first member %+v, want %s under it", first, after.UUID)
		}

		// The chain, found from its second step: one after the other.
		wf, err = o.Workflow(ctx, chain.Tasks[1].UUID, 0, 0)
		must(t, err)
		var steps []string
		for n := wf.Root; n != nil; {
			steps = append(steps, n.UUID+" "+n.State)
			if len(n.Next) == 0 {
				break
			}
			n = n.Next[0]
		}
		want := []string{chain.Tasks[0].UUID + " SUCCESS", chain.Tasks[1].UUID + " SUCCESS", chain.Tasks[2].UUID + " SUCCESS"}
		if wf.Kind != tasks.WorkflowChain || wf.State != tasks.StateSuccess || !slices.Equal(steps, want) {
			t.Fatalf("chain: %s %s %q, want SUCCESS %q", wf.Kind, wf.State, steps, want)
		}

		// The running task, found in whichever queue holds it, with the
		// worker that runs it; the worker, from its heartbeats.
		waitFor(t, "the held task to be listed running by its worker", func() bool {
			task, err := o.Task(ctx, hold.UUID, "")
			return err == nil && task.Holder != nil
		})
		task, err := o.Task(ctx, hold.UUID, "")
		must(t, err)
		host, _ := os.Hostname()
		if task.Queue != "qa" || task.Info.Status != brokers.StatusActive || task.Attempts != 1 ||
			task.Holder.Tag != "ops-worker" || task.Holder.PID != os.Getpid() || task.Holder.Host != host ||
			task.Info.LeaseExpiresAt.Before(time.Now()) {
			t.Fatalf("running task: %+v, info %+v, holder %+v", task, task.Info, task.Holder)
		}
		ws, err := o.Workers(ctx)
		must(t, err)
		if len(ws) != 1 || ws[0].Concurrency != 4 || !slices.Equal(ws[0].Running, []string{hold.UUID}) ||
			!slices.Contains(ws[0].Names, "hold") || !slices.Equal(ws[0].Queues, []string{"qa", "qb"}) {
			t.Fatalf("workers: %+v", ws)
		}
		// 9 tasks finished on qa and qb, of which one failed (the mixed
		// chord's callback failed without running: not counted).
		waitFor(t, "the worker's counts to be reported", func() bool {
			qs, err := o.Queues(ctx)
			processed, failed := 0, 0
			for _, q := range qs {
				processed += q.Processed.Hour
				failed += q.Failed.Hour
			}
			return err == nil && processed == 9 && failed == 1
		})

		// Actions: the failed member, archived, is sent again; the
		// running task is cancelled; a finished one cannot be.
		must(t, o.Do(ctx, ops.Requeue, member(mixed, 1), ""))
		must(t, o.Do(ctx, ops.Cancel, hold.UUID, ""))
		waitFor(t, "the cancelled task's FAILURE", func() bool {
			st, err := sender.GetBackend().(backends.ContextBackend).GetStateContext(ctx, hold.UUID)
			return err == nil && st.State == tasks.StateFailure
		})
		if err := o.Do(ctx, ops.Cancel, chain.Tasks[0].UUID, ""); !errors.Is(err, machinery.ErrTaskFinished) {
			t.Fatalf("cancel a finished task: %v, want ErrTaskFinished", err)
		}
		if err := o.Do(ctx, ops.Delete, "task_nowhere", ""); !errors.Is(err, brokers.ErrTaskNotFound) {
			t.Fatalf("delete an unknown task: %v, want ErrTaskNotFound", err)
		}
		if _, err := o.Queue(ctx, "nowhere"); !errors.Is(err, ops.ErrQueueNotFound) {
			t.Fatalf("an unknown queue: %v, want ErrQueueNotFound", err)
		}
		close(release)
		must(t, stop())
		if ws, err := o.Workers(ctx); err != nil || len(ws) != 0 {
			t.Fatalf("workers after the worker stopped: %+v, %v", ws, err)
		}
	})
}

// chord sends a chord of members with a callback named callback, and
// returns it.
func chord(t *testing.T, s *machinery.Server, callback string, members ...*tasks.Signature) *chordSent {
	t.Helper()
	group, err := tasks.NewGroup(members...)
	must(t, err)
	c, err := tasks.NewChord(group, &tasks.Signature{Name: callback, RoutingKey: "qa"})
	must(t, err)
	if _, err := s.SendChordWithContext(testCtx(t), c, 0); err != nil {
		t.Fatalf("SendChord: %v", err)
	}
	return &chordSent{GroupUUID: group.GroupUUID, Members: group.Tasks, Callback: c.Callback}
}

type chordSent struct {
	GroupUUID string
	Members   []*tasks.Signature
	Callback  *tasks.Signature
}

func member(c *chordSent, i int) string { return c.Members[i].UUID }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
