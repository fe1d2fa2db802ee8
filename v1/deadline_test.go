package machinery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/waitfor"
	"github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Calls made while Redis is stopped (SIGSTOP: connections stay open, the
// kernel takes what is sent, nothing is answered) return at their
// context's deadline. Redis stays stopped until the call has returned, so
// a call that waits for Redis, or for its client's read timeouts (3 s by
// default), cannot return in time however fast the machine is.
const (
	// callTimeout is the deadline of each call.
	callTimeout = 400 * time.Millisecond
	// callMargin is how long past its deadline a call may return: far more
	// than returning takes, less than any read timeout.
	callMargin = 2 * time.Second
)

// stoppableServer returns a Server on a Redis of its own, which the test
// may stop, after a first send (its queue is known, its scripts loaded).
func stoppableServer(t *testing.T) (*machinery.Server, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	s := newServer(t, &config.Config{Broker: srv.URL(), ResultBackend: srv.URL(), DefaultQueue: "q"})
	if _, err := s.SendTaskWithContext(ctxFor(t), addSig()); err != nil {
		t.Fatalf("first send: %v", err)
	}
	return s, srv
}

// ctxFor returns a context that ends with the test, or after 30 s.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func addSig() *tasks.Signature {
	return &tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}}}
}

// whileStopped stops srv, calls call with a context that ends after
// callTimeout, and resumes srv once call has returned; it returns call's
// error and how long it took. A call still running callMargin past its
// deadline fails the test (srv is resumed then, so that it ends).
func whileStopped(t *testing.T, srv *redistest.Server, call func(ctx context.Context) error) (time.Duration, error) {
	t.Helper()
	srv.Pause(t)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	watchdog := time.NewTimer(callTimeout + callMargin)
	defer watchdog.Stop()
	select {
	case err := <-done:
		took := time.Since(start)
		srv.Resume(t)
		return took, err
	case <-watchdog.C:
		srv.Resume(t)
		err := <-done
		took := time.Since(start)
		t.Errorf("the call was still waiting %v past its %v deadline with Redis stopped; it returned after %v, once Redis resumed, with %v",
			callMargin, callTimeout, took, err)
		return took, err
	}
}

// sendOutcomes are the two things a send's error may say.
var sendOutcomes = []error{machinery.ErrNotSent, machinery.ErrMaybeSent}

// checkOutcome fails the test unless err matches want and not the other
// send outcome.
func checkOutcome(t *testing.T, err, want error) {
	t.Helper()
	for _, o := range sendOutcomes {
		if errors.Is(err, o) != (o == want) {
			t.Errorf("error %v: errors.Is(err, %v) = %v, want %v", err, o, errors.Is(err, o), o == want)
		}
	}
}

// TestCallsEndAtTheirDeadlineWhileRedisIsStopped: every send and state
// read returns at its context's deadline while Redis does not answer,
// with an error that matches context.DeadlineExceeded and, for a send,
// says whether it may have been sent: a task whose publish went out may
// have been (it is queued once Redis resumes); a workflow whose first
// step got no reply sent none of its tasks.
func TestCallsEndAtTheirDeadlineWhileRedisIsStopped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// prepare runs before Redis stops and returns the call.
		prepare func(t *testing.T, s *machinery.Server) func(ctx context.Context) error
		want    error // the send's outcome; nil for a read
	}{
		{"SendTaskWithContext", func(t *testing.T, s *machinery.Server) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				_, err := s.SendTaskWithContext(ctx, addSig())
				return err
			}
		}, machinery.ErrMaybeSent},
		{"SendChainWithContext", func(t *testing.T, s *machinery.Server) func(ctx context.Context) error {
			chain, err := tasks.NewChain(addSig(), addSig(), addSig())
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := s.SendChainWithContext(ctx, chain)
				return err
			}
		}, machinery.ErrNotSent},
		{"SendGroupWithContext", func(t *testing.T, s *machinery.Server) func(ctx context.Context) error {
			group, err := tasks.NewGroup(addSig(), addSig())
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := s.SendGroupWithContext(ctx, group, 0)
				return err
			}
		}, machinery.ErrNotSent},
		{"SendChordWithContext", func(t *testing.T, s *machinery.Server) func(ctx context.Context) error {
			group, err := tasks.NewGroup(addSig(), addSig())
			if err != nil {
				t.Fatal(err)
			}
			chord, err := tasks.NewChord(group, addSig())
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := s.SendChordWithContext(ctx, chord, 0)
				return err
			}
		}, machinery.ErrNotSent},
		{"Backend.GetStateContext", func(t *testing.T, s *machinery.Server) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				_, err := s.GetBackend().(backends.ContextBackend).GetStateContext(ctx, "task_never_sent")
				return err
			}
		}, nil},
		{"AsyncResult.GetWithContext", func(t *testing.T, s *machinery.Server) func(ctx context.Context) error {
			r, err := s.SendTaskWithContext(ctxFor(t), addSig()) // no worker runs it
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := r.GetWithContext(ctx, 10*time.Millisecond)
				return err
			}
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, srv := stoppableServer(t)
			call := c.prepare(t, s)
			took, err := whileStopped(t, srv, call)
			t.Logf("returned after %v: %v", took.Round(time.Millisecond), err)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v, want one matching context.DeadlineExceeded", err)
			}
			if c.want != nil {
				checkOutcome(t, err, c.want)
			}
		})
	}
}

// eventually polls cond until it returns nil, failing the test with its
// last error after 10 s.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	waitfor.Nil(t, 10*time.Second, what, cond)
}

// noStateLeft returns nil when none of sigs has a state, nor workflow id
// a record.
func noStateLeft(ctx context.Context, s *machinery.Server, id string, sigs []*tasks.Signature) error {
	for _, sig := range sigs {
		st, err := s.GetBackend().(backends.ContextBackend).GetStateContext(ctx, sig.UUID)
		if err == nil {
			return fmt.Errorf("task %s has state %s", sig.UUID, st.State)
		}
		if !errors.Is(err, backends.ErrStateNotFound) {
			return err
		}
	}
	if _, err := s.GetBackend().(backends.Workflows).GetWorkflowContext(ctx, id); !errors.Is(err, backends.ErrWorkflowNotFound) {
		return fmt.Errorf("workflow %s: record read with %v, want none", id, err)
	}
	return nil
}

// TestChainRefusedLeavesNoState: a chain whose first task the broker
// refuses (its unique key is held) sent nothing, and leaves neither the
// PENDING states it wrote for its tasks nor its record.
func TestChainRefusedLeavesNoState(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	s := newServer(t, &config.Config{Broker: srv.URL(), ResultBackend: srv.URL(), DefaultQueue: "q",
		Redis: &config.RedisConfig{KeyPrefix: strings.TrimSuffix(srv.Prefix(t), ":")}})
	ctx := ctxFor(t)
	unique := func() *tasks.Signature {
		sig := addSig()
		sig.UniqueFor, sig.UniqueKey = time.Hour, "only-one"
		return sig
	}
	if _, err := s.SendTaskWithContext(ctx, unique()); err != nil {
		t.Fatal(err)
	}
	chain, err := tasks.NewChain(unique(), addSig(), addSig())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.SendChainWithContext(ctx, chain)
	if !errors.Is(err, tasks.ErrNotUnique) {
		t.Fatalf("SendChain whose first task's unique key is held: %v, want ErrNotUnique", err)
	}
	checkOutcome(t, err, machinery.ErrNotSent)
	id := chain.Tasks[0].WorkflowUUID
	eventually(t, "the refused chain's states", func() error { return noStateLeft(ctx, s, id, chain.Tasks) })
}

// TestChainSentWhileRedisIsStoppedLeavesNoState: a chain whose send gave
// up at its deadline, its first step's writes sent to a stopped Redis,
// sent none of its tasks; once Redis resumes and runs those writes, the
// PENDING states and the record they wrote are deleted.
func TestChainSentWhileRedisIsStoppedLeavesNoState(t *testing.T) {
	t.Parallel()
	s, srv := stoppableServer(t)
	ctx := ctxFor(t)
	admin := srv.Client(t)
	if err := admin.ConfigSet(ctx, "notify-keyspace-events", "Kgh").Err(); err != nil {
		t.Fatal(err)
	}
	chain, err := tasks.NewChain(addSig(), addSig(), addSig())
	if err != nil {
		t.Fatal(err)
	}
	last := chain.Tasks[2]
	last.UUID = "task_" + uuid.NewString()
	// Every write of the last task's state: the chain's PENDING, then
	// its deletion.
	events := admin.PSubscribe(ctx, "__keyspace@*__:*:state:"+last.UUID)
	t.Cleanup(func() { _ = events.Close() })
	if _, err := events.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	_, err = whileStopped(t, srv, func(ctx context.Context) error {
		_, err := s.SendChainWithContext(ctx, chain)
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendChain while Redis is stopped: %v, want context.DeadlineExceeded", err)
	}
	checkOutcome(t, err, machinery.ErrNotSent)
	// Redis has resumed, and runs what was sent to it while stopped.
	next := func(what string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		msg, err := events.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("waiting for %s of the last task's state: %v", what, err)
		}
		return msg.Payload
	}
	if ev := next("the chain's PENDING write"); ev != "hset" {
		t.Fatalf("first write of the last task's state: %s, want hset", ev)
	}
	for ev := "hset"; ev != "del"; {
		ev = next("the deletion")
	}
	if err := noStateLeft(ctx, s, chain.Tasks[0].WorkflowUUID, chain.Tasks); err != nil {
		t.Fatal(err)
	}
}

// TestTaskThatMayHaveBeenSentIsRefusedWhenSentAgain: a send that may have
// been sent was (its request reached Redis, which ran it once resumed):
// the broker holds the task, and sending the same signature again is
// refused, not queued twice.
func TestTaskThatMayHaveBeenSentIsRefusedWhenSentAgain(t *testing.T) {
	t.Parallel()
	s, srv := stoppableServer(t)
	ctx := ctxFor(t)
	sig := addSig()
	_, err := whileStopped(t, srv, func(ctx context.Context) error {
		_, err := s.SendTaskWithContext(ctx, sig)
		return err
	})
	checkOutcome(t, err, machinery.ErrMaybeSent)
	inspector := s.GetBroker().(brokers.Inspector)
	eventually(t, "the task sent before Redis resumed", func() error {
		_, err := inspector.GetTask(ctx, "q", sig.UUID)
		return err
	})
	_, err = s.SendTaskWithContext(ctx, sig)
	if !errors.Is(err, brokers.ErrDuplicateTask) {
		t.Fatalf("the same signature sent again: %v, want ErrDuplicateTask", err)
	}
	checkOutcome(t, err, machinery.ErrNotSent)
	info, err := inspector.QueueInfo(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if info.Pending != 2 { // with stoppableServer's first
		t.Fatalf("%d tasks pending, want 2", info.Pending)
	}
}
