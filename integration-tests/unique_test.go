package integration_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/tasks"
)

// Two processes send the same unique task at once: exactly one is sent,
// the other is refused naming it; once it finished, the key is free.
func TestUniqueTaskAcrossServers(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 2)
		a, b := s[0], s[1]
		release, started := make(chan struct{}), make(chan struct{}, 1)
		if err := b.RegisterTask("report", func(day string) error { started <- struct{}{}; <-release; return nil }); err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		report := func() *tasks.Signature {
			s := sig("report", tasks.Arg{Type: "string", Value: "2026-11-26"})
			s.UniqueFor = time.Minute
			return s
		}
		var (
			mu      sync.Mutex
			sent    []*result.AsyncResult
			refused []error
			wg      sync.WaitGroup
		)
		start := make(chan struct{})
		for _, s := range []interface {
			SendTaskWithContext(context.Context, *tasks.Signature) (*result.AsyncResult, error)
		}{a, b, a, b} {
			wg.Go(func() {
				<-start
				r, err := s.SendTaskWithContext(ctx, report())
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					refused = append(refused, err)
					return
				}
				sent = append(sent, r)
			})
		}
		close(start)
		wg.Wait()
		if len(sent) != 1 || len(refused) != 3 {
			t.Fatalf("%d sent and %d refused of 4 concurrent sends, want 1 and 3: %v", len(sent), len(refused), refused)
		}
		for _, err := range refused {
			var nu *tasks.NotUniqueError
			if !errors.As(err, &nu) || nu.Holder != sent[0].Signature.UUID {
				t.Fatalf("refused with %v, want a *tasks.NotUniqueError naming %s", err, sent[0].Signature.UUID)
			}
		}
		// Running, it still holds the key; finished, it frees it.
		w := b.NewWorker("w", 1)
		launch(t, w)
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the holder never started")
		}
		if _, err := a.SendTaskWithContext(ctx, report()); !errors.Is(err, tasks.ErrNotUnique) {
			t.Fatalf("send while the holder runs: %v, want ErrNotUnique", err)
		}
		close(release)
		if _, err := sent[0].GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		var again *result.AsyncResult
		waitFor(t, "the key to be free once the holder finished", func() bool {
			r, err := a.SendTaskWithContext(ctx, report())
			if err != nil && !errors.Is(err, tasks.ErrNotUnique) {
				t.Fatal(err)
			}
			again = r
			return err == nil
		})
		if _, err := again.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
	})
}

// Only a task sent by itself, or a chain's first, can be unique.
func TestUniqueOnlyForTasksSentAlone(t *testing.T) {
	s := bareServer(t, pairs()[0])
	ctx := testCtx(t)
	member := sig("report")
	member.UniqueFor = time.Minute
	group, err := tasks.NewGroup(member, sig("report"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendGroupWithContext(ctx, group, 0); !errors.Is(err, tasks.ErrUniqueInWorkflow) {
		t.Fatalf("SendGroup with a unique member: %v, want ErrUniqueInWorkflow", err)
	}
	handBuilt := sig("report") // no GroupUUID of its own yet
	handBuilt.UniqueFor = time.Minute
	if _, err := s.SendGroupWithContext(ctx, &tasks.Group{GroupUUID: "group_hand_built", Tasks: []*tasks.Signature{handBuilt}}, 0); !errors.Is(err, tasks.ErrUniqueInWorkflow) {
		t.Fatalf("SendGroup of a hand-built group with a unique member: %v, want ErrUniqueInWorkflow", err)
	}
	callback := sig("report")
	callback.UniqueFor = time.Minute
	plainGroup, err := tasks.NewGroup(sig("report"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendChordWithContext(ctx, &tasks.Chord{Group: plainGroup, Callback: callback}, 0); !errors.Is(err, tasks.ErrUniqueInWorkflow) {
		t.Fatalf("SendChord with a unique callback: %v, want ErrUniqueInWorkflow", err)
	}
	step := sig("report")
	step.UniqueFor = time.Minute
	chain, err := tasks.NewChain(sig("report"), step)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendChainWithContext(ctx, chain); !errors.Is(err, tasks.ErrUniqueInWorkflow) {
		t.Fatalf("SendChain with a unique second step: %v, want ErrUniqueInWorkflow", err)
	}
	bad := sig("report")
	bad.UniqueKey = "k"
	if _, err := s.SendTaskWithContext(ctx, bad); err == nil {
		t.Fatal("a UniqueKey without UniqueFor was accepted")
	}
}

// Debouncing: sends that replace the waiting holder's args and ETA run
// once, with the last args; every send's result is that run's.
func TestUniqueReplaceDebounces(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 2)
		sender, workerSrv := s[0], s[1]
		runs := make(chan int64, 10)
		if err := workerSrv.RegisterTask("reindex", func(n int64) (int64, error) { runs <- n; return n, nil }); err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		var results []*result.AsyncResult
		for n := int64(1); n <= 3; n++ {
			s := sig("reindex", i64(n))
			s.UniqueFor, s.UniqueKey, s.UniqueReplace = time.Minute, "users", true
			eta := time.Now().Add(300 * time.Millisecond)
			s.ETA = &eta
			r, err := sender.SendTaskWithContext(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
		}
		launch(t, workerSrv.NewWorker("w", 1))
		for _, r := range results {
			out, err := r.GetWithContext(ctx, poll)
			if err != nil || out[0].Int() != 3 {
				t.Fatalf("a debounced send's result: %v, %v; want the last args' run (3)", out, err)
			}
		}
		if n := <-runs; n != 3 || len(runs) != 0 {
			t.Fatalf("ran with %d (and %d more runs), want once with 3", n, len(runs))
		}
	})
}
