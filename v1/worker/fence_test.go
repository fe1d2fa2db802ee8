package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// staleBroker is a broker (not paired with the backend, as on Redis
// Cluster) that refuses every commit, as it does to a worker whose lease is
// gone.
type staleBroker struct {
	brokers.LeaseBroker
	commits atomic.Int32
}

func (b *staleBroker) Commit(ctx context.Context, d *brokers.Delivery, outcome *tasks.TaskState) error {
	b.commits.Add(1)
	return fmt.Errorf("task %s: %w", d.Signature.UUID, brokers.ErrLeaseLost)
}

// writeCounter counts every write made to a backend.
type writeCounter struct {
	fullBackend
	writes atomic.Int32
}

func (c *writeCounter) count() { c.writes.Add(1) }
func (c *writeCounter) SetStateStartedContext(context.Context, *tasks.Signature) error {
	c.count()
	return nil
}
func (c *writeCounter) SetStateRetryContext(context.Context, *tasks.Signature) error {
	c.count()
	return nil
}
func (c *writeCounter) SetStateSuccessContext(context.Context, *tasks.Signature, []*tasks.TaskResult) error {
	c.count()
	return nil
}
func (c *writeCounter) SetStateFailureContext(context.Context, *tasks.Signature, string) error {
	c.count()
	return nil
}
func (c *writeCounter) CompleteGroupMember(context.Context, *tasks.Signature, *tasks.TaskState) (bool, error) {
	c.count()
	return true, nil
}
func (c *writeCounter) TriggerChordContext(context.Context, string, string) (bool, error) {
	c.count()
	return true, nil
}

// A worker whose commit is refused (its lease is gone) writes no state, no
// group record, elects no chord callback and sends no callback, whatever
// the outcome: the fence that makes this hold on Redis Cluster, where the
// state and group keys are not in the queue's slot.
func TestRefusedCommitWritesNothing(t *testing.T) {
	t.Parallel()
	cnf := (&config.Config{Logger: discardLogger}).WithDefaults()
	mem := newEngineBroker(t, cnf)
	t.Cleanup(func() { _ = mem.Close() })
	broker := &staleBroker{LeaseBroker: mem}
	be := newEngineBackend(t, cnf)
	t.Cleanup(func() { _ = be.Close() })
	backend := &writeCounter{fullBackend: be}
	var sent atomic.Int32
	w := New(Params{Broker: broker, Backend: backend, Config: cnf, Logger: discardLogger,
		SendFunc: func(context.Context, *tasks.Signature) error { sent.Add(1); return nil }})
	if w.store.OneStep() {
		t.Fatal("worker paired with a backend its broker does not know")
	}
	ctx := context.Background()
	callback := func() []*tasks.Signature { return []*tasks.Signature{{UUID: "task_next", Name: "next"}} }
	for _, tc := range []struct {
		name    string
		sig     *tasks.Signature
		runErr  error
		results []*tasks.TaskResult
	}{
		{"success with OnSuccess", &tasks.Signature{Name: "a", OnSuccess: callback()}, nil, []*tasks.TaskResult{{Type: "int64", Value: 1}}},
		{"plain success", &tasks.Signature{Name: "a"}, nil, nil},
		{"chord member success", &tasks.Signature{Name: "a", GroupUUID: "group_g", GroupTaskCount: 1,
			ChordCallback: &tasks.Signature{UUID: "chord_c", Name: "sum"}}, nil, nil},
		{"failure with OnError", &tasks.Signature{Name: "a", OnError: callback()}, errors.New("boom"), nil},
		{"chord member failure", &tasks.Signature{Name: "a", GroupUUID: "group_g", GroupTaskCount: 1,
			ChordCallback: &tasks.Signature{UUID: "chord_c", Name: "sum", OnError: callback()}}, errors.New("boom"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := tc.sig
			sig.UUID, sig.RoutingKey = "task_"+t.Name(), testQueue+t.Name()
			if err := mem.Publish(ctx, sig); err != nil {
				t.Fatal(err)
			}
			ds, err := mem.Fetch(ctx, []string{sig.RoutingKey}, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			commits, writes, sends := broker.commits.Load(), backend.writes.Load(), sent.Load()
			err = w.settle(ctx, ds[0].Signature, ds[0], nil, tc.results, tc.runErr, false, w.arch.Logger)
			if !errors.Is(err, brokers.ErrLeaseLost) {
				t.Fatalf("settle with a refused commit: %v, want ErrLeaseLost", err)
			}
			if broker.commits.Load() == commits {
				t.Fatal("settle wrote nothing without committing first")
			}
			if n := backend.writes.Load() - writes; n != 0 {
				t.Fatalf("%d backend writes after a refused commit, want 0", n)
			}
			if n := sent.Load() - sends; n != 0 {
				t.Fatalf("%d callbacks sent after a refused commit, want 0", n)
			}
		})
	}
}

// A task whose worker committed its outcome and stopped before settling it
// is not run again: the next worker finds the outcome in its delivery,
// writes the state again and sends what follows, once.
func TestCommittedTaskIsFinishedNotRun(t *testing.T) {
	t.Parallel()
	for _, paired := range []bool{false, true} {
		t.Run(fmt.Sprintf("paired=%t", paired), func(t *testing.T) {
			t.Parallel()
			cnf := (&config.Config{Logger: discardLogger, LeaseDuration: time.Second, RecoverInterval: 20 * time.Millisecond}).WithDefaults()
			var broker *redisbroker.Broker
			var backend *redisbackend.Backend
			if paired {
				broker, backend = newEnginePair(t, cnf)
			} else {
				broker, backend = newEngineBroker(t, cnf), newEngineBackend(t, cnf)
			}
			t.Cleanup(func() { _ = broker.Close(); _ = backend.Close() })
			ctx := context.Background()
			sig := &tasks.Signature{UUID: "task_committed", Name: "add", RoutingKey: testQueue,
				OnSuccess: []*tasks.Signature{{UUID: "task_next", Name: "next"}}}
			if err := broker.Publish(ctx, sig); err != nil {
				t.Fatal(err)
			}
			first, err := broker.Fetch(ctx, []string{testQueue}, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			results := []*tasks.TaskResult{{Type: "int64", Value: 3}}
			if err := broker.Commit(ctx, first[0], tasks.NewSuccessTaskState(sig, results)); err != nil {
				t.Fatal(err)
			}
			// The first worker dies here: its lease runs out.

			var runs atomic.Int32
			sent := make(chan *tasks.Signature, 4)
			h := &harness{t: t}
			h.start(Params{Broker: broker, Backend: backend, Config: cnf, Logger: discardLogger,
				Tasks: registry{"add": func() (int64, error) { runs.Add(1); return 0, nil }},
				SendFunc: func(_ context.Context, sig *tasks.Signature) error {
					sent <- tasks.CopySignature(sig)
					return nil
				},
				Concurrency: 1, Queues: []string{testQueue}})
			next := recv(t, sent, "the committed task's callback")
			if next.UUID != "task_next" || len(next.Args) != 1 || fmt.Sprint(next.Args[0].Value) != "3" {
				t.Fatalf("callback sent: %+v, want task_next with the committed result 3", next)
			}
			waitAcked(t, broker, testQueue)
			if len(sent) != 0 {
				t.Fatalf("callback sent again: %+v", <-sent)
			}
			if n := runs.Load(); n != 0 {
				t.Fatalf("the committed task ran %d times, want 0", n)
			}
			st, err := backend.GetStateContext(ctx, sig.UUID)
			if err != nil || st.State != tasks.StateSuccess {
				t.Fatalf("state after finishing: %+v, %v; want SUCCESS", st, err)
			}
		})
	}
}

// waitAcked polls until queue holds no task, pending or active.
func waitAcked(t *testing.T, b brokers.LeaseBroker, queue string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := b.(brokers.Inspector).QueueInfo(context.Background(), queue)
		if err == nil && info.Pending+info.Active == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s still holds tasks after %s: %+v, %v", queue, waitTimeout, info, err)
		}
		<-tick.C
	}
}
