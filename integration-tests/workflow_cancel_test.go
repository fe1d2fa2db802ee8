package integration_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// runLog records which tasks started, and when.
type runLog struct {
	mu      sync.Mutex
	started map[string]time.Time
}

func (l *runLog) start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started == nil {
		l.started = make(map[string]time.Time)
	}
	l.started[tasks.SignatureFromContext(ctx).UUID] = time.Now()
}

func (l *runLog) get(uuid string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.started[uuid]
	return at, ok
}

// A chain, a chord and a group are cancelled from another process, by a
// later task's UUID, by the workflow's id and by a member's: the running
// tasks stop (well before a lease renewal could tell them), nothing that
// had not started runs, waiting on the workflow or any unfinished task
// returns tasks.ErrTaskCancelled, finished tasks keep their outcome, and
// OnError callbacks (a chord callback's included) are not sent.
func TestCancelWorkflow(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 3, func(c *config.Config) {
			c.LeaseDuration = time.Minute
			c.LeaseRenewInterval = 30 * time.Second
		})
		sender, operator, workerSrv := s[0], s[1], s[2]
		var log runLog
		started := make(chan string, 16)
		if err := workerSrv.RegisterTasks(map[string]interface{}{
			"add": func(ctx context.Context, a, b int64) (int64, error) {
				log.start(ctx)
				return a + b, nil
			},
			"hold": func(ctx context.Context, xs ...int64) error {
				log.start(ctx)
				started <- tasks.SignatureFromContext(ctx).UUID
				<-ctx.Done()
				return ctx.Err()
			},
			"sum": func(ctx context.Context, xs ...int64) (int64, error) {
				log.start(ctx)
				return int64(len(xs)), nil
			},
			"on_error": func(ctx context.Context, msg string) error {
				log.start(ctx)
				return nil
			},
		}); err != nil {
			t.Fatal(err)
		}
		launch(t, workerSrv.NewWorker("w", 4))
		ctx := testCtx(t)
		wantCancelled := func(what string, uuids ...string) {
			t.Helper()
			for _, id := range uuids {
				st, err := sender.GetBackend().(backends.ContextBackend).GetStateContext(ctx, id)
				if err != nil || !st.IsFailure() || !strings.HasPrefix(st.Error, tasks.CancelledMessage) {
					t.Fatalf("%s: state of %s: %+v, %v; want FAILURE, cancelled", what, id, st, err)
				}
				if _, ran := log.get(id); ran {
					t.Fatalf("%s: %s ran", what, id)
				}
			}
		}
		onErrorOf := func(s *tasks.Signature) *tasks.Signature {
			cb := sig("on_error")
			s.OnError = []*tasks.Signature{cb}
			return cb
		}

		// A chain: the first step done, the second running, two to come;
		// cancelled by the third's UUID.
		first, second, third, fourth := sig("add", i64(1), i64(2)), sig("hold"), sig("add", i64(3)), sig("add", i64(4))
		errCallbacks := []*tasks.Signature{onErrorOf(second), onErrorOf(third)}
		chain, err := tasks.NewChain(first, second, third, fourth)
		if err != nil {
			t.Fatal(err)
		}
		cr, err := sender.SendChainWithContext(ctx, chain)
		if err != nil {
			t.Fatal(err)
		}
		if got := recvString(t, started); got != second.UUID {
			t.Fatalf("started %s, want the chain's second step %s", got, second.UUID)
		}
		if err := operator.CancelWorkflow(ctx, third.UUID); err != nil {
			t.Fatal(err)
		}
		if _, err := cr.GetWithContext(ctx, poll); !errors.Is(err, tasks.ErrTaskCancelled) {
			t.Fatalf("waiting on a cancelled chain: %v, want ErrTaskCancelled", err)
		}
		if st, err := sender.GetBackend().(backends.ContextBackend).GetStateContext(ctx, first.UUID); err != nil || !st.IsSuccess() {
			t.Fatalf("the chain's finished first step: %+v, %v; want SUCCESS kept", st, err)
		}
		// The second step's context ended: its worker settles it no more.
		waitFor(t, "the chain's running step to be archived", func() bool {
			info, err := queueInfo(ctx, operator)
			return err == nil && info.Active == 0 && info.Archived >= 1
		})
		wantCancelled("chain", third.UUID, fourth.UUID)
		for _, cb := range errCallbacks {
			if _, err := sender.GetBackend().(backends.ContextBackend).GetStateContext(ctx, cb.UUID); !errors.Is(err, backends.ErrStateNotFound) {
				t.Fatalf("an OnError callback of the cancelled chain was sent (%v)", err)
			}
		}
		if err := operator.CancelWorkflow(ctx, first.UUID); !errors.Is(err, machinery.ErrTaskFinished) {
			t.Fatalf("cancelling a cancelled chain: %v, want ErrTaskFinished", err)
		}

		// A chord: two members running, one scheduled, cancelled by the
		// group's id; its callback never runs, nor does its OnError.
		later := time.Now().Add(time.Hour)
		scheduled := sig("add", i64(1), i64(1))
		scheduled.ETA = &later
		m1, m2 := sig("hold"), sig("hold")
		group, err := tasks.NewGroup(m1, m2, scheduled)
		if err != nil {
			t.Fatal(err)
		}
		callback := sig("sum")
		cbError := onErrorOf(callback)
		chord, err := tasks.NewChord(group, callback)
		if err != nil {
			t.Fatal(err)
		}
		chr, err := sender.SendChordWithContext(ctx, chord, 0)
		if err != nil {
			t.Fatal(err)
		}
		recvString(t, started)
		recvString(t, started)
		if err := operator.CancelWorkflow(ctx, group.GroupUUID); err != nil {
			t.Fatal(err)
		}
		if _, err := chr.GetWithContext(ctx, poll); !errors.Is(err, tasks.ErrTaskCancelled) {
			t.Fatalf("waiting on a cancelled chord: %v, want ErrTaskCancelled", err)
		}
		wantCancelled("chord", scheduled.UUID, callback.UUID)
		for _, m := range []*tasks.Signature{m1, m2} {
			waitFor(t, "a running chord member to fail, cancelled", func() bool {
				st, err := sender.GetBackend().(backends.ContextBackend).GetStateContext(ctx, m.UUID)
				return err == nil && st.IsFailure()
			})
		}
		if _, err := sender.GetBackend().(backends.ContextBackend).GetStateContext(ctx, cbError.UUID); !errors.Is(err, backends.ErrStateNotFound) {
			t.Fatalf("the cancelled chord's callback's OnError was sent (%v)", err)
		}

		// A group of scheduled tasks, by a member's UUID, with its OnError
		// callbacks asked for.
		g1, g2 := sig("add", i64(1), i64(1)), sig("add", i64(2), i64(2))
		g1.ETA, g2.ETA = &later, &later
		g1Error := onErrorOf(g1)
		// g1's OnSuccess is not sent yet: kept out, it fails, and its
		// OnError runs.
		g1Next := sig("add", i64(5), i64(5))
		g1.OnSuccess = []*tasks.Signature{g1Next}
		g1NextError := onErrorOf(g1Next)
		plain, err := tasks.NewGroup(g1, g2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sender.SendGroupWithContext(ctx, plain, 0); err != nil {
			t.Fatal(err)
		}
		if err := operator.CancelWorkflow(ctx, g2.UUID, machinery.WithOnError()); err != nil {
			t.Fatal(err)
		}
		wantCancelled("group", g1.UUID, g2.UUID, g1Next.UUID)
		waitFor(t, "the OnError callbacks asked for to run", func() bool {
			_, ran := log.get(g1Error.UUID)
			_, nextRan := log.get(g1NextError.UUID)
			return ran && nextRan
		})

		// Unknown: a clear error.
		if err := operator.CancelWorkflow(ctx, "chain_unknown"); !errors.Is(err, backends.ErrWorkflowNotFound) {
			t.Fatalf("cancelling an unknown workflow: %v, want ErrWorkflowNotFound", err)
		}
		if err := operator.CancelWorkflow(ctx, ""); !errors.Is(err, backends.ErrWorkflowNotFound) {
			t.Fatalf("cancelling workflow \"\": %v, want ErrWorkflowNotFound", err)
		}
	})
}

// The race that matters: a chord is cancelled while its last member
// finishes and elects itself to send the callback. Whatever the order, the
// callback either ran to success, started before CancelWorkflow returned,
// which then said the chord had finished, or ends FAILURE, cancelled, and
// CancelWorkflow said it cancelled something; it never stays PENDING.
// (A callback a worker had already taken when the chord was cancelled may
// begin before its worker hears of it; it cannot succeed.)
func TestCancelWorkflowWhileTheChordCompletes(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 3)
		sender, operator, workerSrv := s[0], s[1], s[2]
		var log runLog
		if err := workerSrv.RegisterTasks(map[string]interface{}{
			"add": func(a, b int64) (int64, error) { return a + b, nil },
			"sum": func(ctx context.Context, xs ...int64) (int64, error) {
				log.start(ctx)
				return int64(len(xs)), nil
			},
		}); err != nil {
			t.Fatal(err)
		}
		// First the worst case, made certain: the member that completed
		// the chord is sending the callback (held in the pre-publish
		// handler) when the chord is cancelled. The send is dropped.
		reached, release := make(chan struct{}), make(chan struct{})
		var held atomic.Bool
		workerSrv.SetPreTaskHandler(func(s *tasks.Signature) {
			if s.Name == "sum" && held.CompareAndSwap(false, true) {
				close(reached)
				<-release
			}
		})
		launch(t, workerSrv.NewWorker("w", 4))
		ctx := testCtx(t)
		_, callback, r := sendAddChord(ctx, t, sender)
		select {
		case <-reached:
		case <-ctx.Done():
			t.Fatal("the chord's callback was never sent")
		}
		if err := operator.CancelWorkflow(ctx, callback.UUID); err != nil {
			t.Fatal(err)
		}
		close(release)
		if _, err := r.GetWithContext(ctx, poll); !errors.Is(err, tasks.ErrTaskCancelled) {
			t.Fatalf("waiting on a chord cancelled while its callback was being sent: %v, want ErrTaskCancelled", err)
		}
		waitFor(t, "the queue to be idle", func() bool {
			info, err := queueInfo(ctx, operator)
			return err == nil && info.Pending == 0 && info.Active == 0
		})
		if _, ran := log.get(callback.UUID); ran {
			t.Fatal("the callback being sent when its chord was cancelled ran")
		}

		const rounds = 20
		var ran, kept int
		for i := range rounds {
			group, callback, r := sendAddChord(ctx, t, sender)
			// The cancellation meets the chord at once, once one member
			// has finished, or once both have (the callback being sent,
			// or sent).
			for _, m := range group.Tasks[:i%3] {
				waitFor(t, "a chord member to finish", func() bool {
					st, err := sender.GetBackend().(backends.ContextBackend).GetStateContext(ctx, m.UUID)
					return err == nil && st.IsCompleted()
				})
			}
			err := operator.CancelWorkflow(ctx, group.GroupUUID)
			returned := time.Now()
			if err != nil && !errors.Is(err, machinery.ErrTaskFinished) {
				t.Fatal(err)
			}
			out, werr := r.GetWithContext(ctx, poll)
			at, started := log.get(callback.UUID)
			switch {
			case werr == nil:
				if !started || at.After(returned) || out[0].Int() != 2 || !errors.Is(err, machinery.ErrTaskFinished) {
					t.Fatalf("round %d: the callback succeeded (%v), started %v at %v, the cancellation returned %v at %v", i, out, started, at, err, returned)
				}
				ran++
			case errors.Is(werr, tasks.ErrTaskCancelled):
				if err != nil {
					t.Fatalf("round %d: the chord was cancelled, but CancelWorkflow said %v", i, err)
				}
				kept++
			default:
				t.Fatalf("round %d: waiting on the chord: %v", i, werr)
			}
		}
		// Every callback kept out stays out: once the queue is idle none
		// has started since.
		waitFor(t, "the queue to be idle", func() bool {
			info, err := queueInfo(ctx, operator)
			return err == nil && info.Pending == 0 && info.Active == 0
		})
		t.Logf("%d callbacks ran before the cancellation, %d were cancelled", ran, kept)
	})
}

// queueInfo returns the sizes of s's DefaultQueue.
func queueInfo(ctx context.Context, s *machinery.Server) (*brokers.QueueInfo, error) {
	return s.GetBroker().(brokers.Inspector).QueueInfo(ctx, s.GetConfig().DefaultQueue)
}

// sendAddChord sends a chord of two "add" members and a "sum" callback.
func sendAddChord(ctx context.Context, t *testing.T, sender *machinery.Server) (*tasks.Group, *tasks.Signature, *result.ChordAsyncResult) {
	t.Helper()
	group, err := tasks.NewGroup(sig("add", i64(1), i64(1)), sig("add", i64(2), i64(2)))
	if err != nil {
		t.Fatal(err)
	}
	callback := sig("sum")
	chord, err := tasks.NewChord(group, callback)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sender.SendChordWithContext(ctx, chord, 0)
	if err != nil {
		t.Fatal(err)
	}
	return group, callback, r
}

// A task sent again with the UUID of an earlier one that finished reads as
// the task now sent (PENDING), not as the earlier one's outcome; and an
// archived task's state keeps the time it was sent as CreatedAt.
func TestStateOfATaskSentAgainWithItsUUID(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		ctx := testCtx(t)
		queue := s.GetConfig().DefaultQueue
		x := sig("add", i64(1), i64(2))
		if _, err := s.SendTaskWithContext(ctx, x); err != nil {
			t.Fatal(err)
		}
		sent, err := s.GetBackend().(backends.ContextBackend).GetStateContext(ctx, x.UUID)
		if err != nil || sent.State != tasks.StatePending {
			t.Fatalf("state after the send: %+v, %v; want PENDING", sent, err)
		}
		// A CreatedAt of the archive's time would differ from the send's.
		time.Sleep(20 * time.Millisecond)
		if err := s.ArchiveTask(ctx, queue, x.UUID, "by hand"); err != nil {
			t.Fatal(err)
		}
		st, err := s.GetBackend().(backends.ContextBackend).GetStateContext(ctx, x.UUID)
		if err != nil || !st.IsFailure() {
			t.Fatalf("state after the archive: %+v, %v; want FAILURE", st, err)
		}
		if d := st.CreatedAt.Sub(sent.CreatedAt); d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("CreatedAt after the archive %s, want the send's %s", st.CreatedAt, sent.CreatedAt)
		}
		if _, err := s.SendTaskWithContext(ctx, x); err != nil {
			t.Fatalf("sending the task again: %v", err)
		}
		again, err := s.GetBackend().(backends.ContextBackend).GetStateContext(ctx, x.UUID)
		if err != nil || again.State != tasks.StatePending || again.Error != "" {
			t.Fatalf("state after sending it again: %+v, %v; want PENDING", again, err)
		}
	})
}

// A send skips looking for an earlier task or state only with the UUID it
// made itself: a pre-publish handler that gives the task another UUID, of
// an archived task, makes the send replace that task and its state. (On
// Cluster, as in machinery, the PENDING state is written before the
// handler runs, under the UUID the send made.)
func TestUUIDSetByThePrePublishHandlerIsLookedUp(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		if p.name == "cluster" {
			t.Skip("the PENDING state is written before the pre-publish handler runs")
		}
		s := bareServer(t, p)
		ctx := testCtx(t)
		x := sig("add", i64(1), i64(2))
		if _, err := s.SendTaskWithContext(ctx, x); err != nil {
			t.Fatal(err)
		}
		if err := s.ArchiveTask(ctx, s.GetConfig().DefaultQueue, x.UUID, "by hand"); err != nil {
			t.Fatal(err)
		}
		s.SetPreTaskHandler(func(sig *tasks.Signature) { sig.UUID = x.UUID })
		y := sig("add", i64(3), i64(4)) // no UUID: the send makes one
		if _, err := s.SendTaskWithContext(ctx, y); err != nil {
			t.Fatal(err)
		}
		if y.UUID != x.UUID {
			t.Fatalf("UUID %s, want the handler's %s", y.UUID, x.UUID)
		}
		st, err := s.GetBackend().(backends.ContextBackend).GetStateContext(ctx, x.UUID)
		if err != nil || st.State != tasks.StatePending || st.Error != "" {
			t.Fatalf("state after the send: %+v, %v; want PENDING", st, err)
		}
		qi, err := s.GetBroker().(brokers.Inspector).QueueInfo(ctx, s.GetConfig().DefaultQueue)
		if err != nil || qi.Pending != 1 || qi.Archived != 0 {
			t.Fatalf("queue: %+v, %v; want 1 pending, none archived", qi, err)
		}
	})
}
