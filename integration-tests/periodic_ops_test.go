package integration_test

import (
	"slices"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/ops"
	storepair "github.com/b6192125/machinist/internal/pair"
	"github.com/b6192125/machinist/v1/tasks"
)

// The periodic tasks registered are listed with their spec, kind, tasks
// and queues, when they run next, and, once a tick was sent and ran,
// when it was and how it ended.
func TestPeriodicListed(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		ctx := testCtx(t)
		must(t, s.RegisterTasks(map[string]interface{}{"tick": func() error { return nil }}))
		launch(t, s.NewWorker("w", 1))
		must(t, s.RegisterPeriodicTask("@every 1s", "ticker", sig("tick")))
		must(t, s.RegisterPeriodicChain("0 3 * * *", "nightly", sig("tick"), &tasks.Signature{Name: "tick", RoutingKey: "reports"}))
		o, err := ops.New(storepair.New(s.GetBroker(), s.GetBackend(), nil), s)
		must(t, err)
		var got []*ops.Periodic
		waitFor(t, "the ticker's last tick to be listed as run", func() bool {
			got, err = o.Periodic(ctx)
			must(t, err)
			return len(got) == 2 && got[1].Outcome == "SUCCESS"
		})
		nightly, ticker := got[0], got[1]
		if nightly.Name != "nightly" || nightly.Kind != "chain" || !slices.Equal(nightly.Tasks, []string{"tick", "tick"}) ||
			len(nightly.Queues) != 2 || nightly.Queues[1] != "reports" || !nightly.Last.At.IsZero() || nightly.Outcome != "" {
			t.Fatalf("the nightly chain is listed as %+v", nightly)
		}
		if next := nightly.Next.UTC(); next.Hour() != 3 || next.Minute() != 0 || !next.After(time.Now()) {
			t.Fatalf("the nightly chain runs next at %v, want the next 03:00", nightly.Next)
		}
		if ticker.Kind != "task" || ticker.Spec != "@every 1s" || ticker.Last.At.IsZero() || ticker.Next.Sub(time.Now()) > time.Second {
			t.Fatalf("the ticker is listed as %+v", ticker)
		}
	})
}
