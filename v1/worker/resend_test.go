package worker

import (
	"context"
	"sync"
	"testing"

	memorybackend "github.com/b6192125/machinist/v1/backends/memory"
	memorybroker "github.com/b6192125/machinist/v1/brokers/memory"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// A task that runs again after a recovery sends its callbacks again; one
// that the earlier run sent and that has since started or finished must not
// be sent a second time (the broker may have forgotten it), and one that
// never got going must be.
func TestRecoveredTaskDoesNotResendCallbacksThatRan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		childState string
		wantSent   bool
	}{
		{tasks.StateSuccess, false},
		{tasks.StateStarted, false},
		{tasks.StateFailure, false},
		{tasks.StatePending, true},
		{"", true}, // no state at all
	} {
		cnf := (&config.Config{}).WithDefaults()
		broker := memorybroker.New(memorybroker.OptionsFrom(cnf))
		backend := memorybackend.New(memorybackend.OptionsFrom(cnf))
		t.Cleanup(func() { broker.Close(); backend.Close() })
		ctx := context.Background()

		child := &tasks.Signature{UUID: "task_child", Name: "child", RoutingKey: "q"}
		parent := &tasks.Signature{UUID: "task_parent", Name: "parent", RoutingKey: "q", OnSuccess: []*tasks.Signature{child}}
		switch tc.childState {
		case tasks.StateSuccess:
			backend.SetStateSuccessContext(ctx, child, nil)
		case tasks.StateStarted:
			backend.SetStateStartedContext(ctx, child)
		case tasks.StateFailure:
			backend.SetStateFailureContext(ctx, child, "x")
		case tasks.StatePending:
			backend.SetStatePendingContext(ctx, child)
		}
		if err := broker.Publish(ctx, parent); err != nil {
			t.Fatal(err)
		}
		ds, err := broker.Fetch(ctx, []string{"q"}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := ds[0]
		d.Recovered = 1 // as the recoverer leaves it

		var mu sync.Mutex
		var sent []string
		w := New(Params{Broker: broker, Backend: backend, Config: cnf, SendFunc: func(ctx context.Context, sig *tasks.Signature) error {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, sig.UUID)
			return nil
		}})
		if err := w.settle(ctx, d.Signature, d, nil, nil, nil, false, w.arch.Logger); err != nil {
			t.Fatalf("child %q: settle: %v", tc.childState, err)
		}
		if got := len(sent) == 1; got != tc.wantSent {
			t.Errorf("child state %q: callback sent %v, want %v", tc.childState, got, tc.wantSent)
		}
	}
}
