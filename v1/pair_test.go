package machinery_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/store"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// plainServer returns a Server on a broker and a backend that offer only
// the LeaseBroker and Backend interfaces (a broker of your own, say): the
// memory pair's, with every other capability hidden. It runs through the
// step-by-step side of the one adapter: nothing is settled in one step,
// nothing is inspected, cancelled or aggregated.
func plainServer(t *testing.T) *machinery.Server {
	t.Helper()
	s := newServer(t, &config.Config{Broker: "memory://", NoUnixSignals: true})
	s.SetBroker(struct{ brokers.LeaseBroker }{s.GetBroker().(brokers.LeaseBroker)})
	s.SetBackend(struct {
		backends.Backend
		backends.ContextBackend
	}{s.GetBackend(), s.GetBackend().(backends.ContextBackend)})
	registerArithmetic(t, s, map[string]any{"fail": func() error { return errors.New("no") }})
	return s
}

func TestPlainBrokerAndBackendRunTasksAndWorkflows(t *testing.T) {
	t.Parallel()
	s := plainServer(t)
	w := s.NewWorker("plain", 2)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	t.Cleanup(func() { w.Quit(); <-errs })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	sendWorkflows(ctx, t, s)

	fr, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "fail"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fr.GetWithContext(ctx, 5*time.Millisecond); err == nil || err.Error() != "no" {
		t.Fatalf("failing task: %v, want its error", err)
	}
}

// What the parts do not offer is refused with store.ErrUnsupported, naming
// the part, rather than done halfway.
func TestPlainBrokerRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	s := plainServer(t)
	ctx := context.Background()
	if err := s.CancelTask(ctx, "", "task_x"); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("CancelTask: %v, want ErrUnsupported", err)
	}
	if err := s.CancelWorkflow(ctx, "chain_x"); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("CancelWorkflow: %v, want ErrUnsupported", err)
	}
	if err := s.DeleteTask(ctx, "", "task_x"); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("DeleteTask: %v, want ErrUnsupported", err)
	}
	err := s.RegisterAggregator("add", machinery.AggregationPolicy{},
		func(_ context.Context, _ string, ms []*tasks.Signature) (*tasks.Signature, error) { return ms[0], nil })
	if err == nil {
		t.Error("RegisterAggregator on a broker that does not aggregate: no error")
	}
}
