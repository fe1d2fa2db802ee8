package machinery_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	lockiface "github.com/b6192125/machinist/v1/locks/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// seamServers returns a Server on the memory pair and one on Redis, each
// with the task "double" registered.
func seamServers(t *testing.T) map[string]*machinery.Server {
	t.Helper()
	srv := redistest.Shared(t)
	out := map[string]*machinery.Server{
		"memory": newServer(t, &config.Config{Broker: "memory://", NoUnixSignals: true}),
		"redis": newServer(t, &config.Config{
			Broker: srv.URL(), ResultBackend: srv.URL(), NoUnixSignals: true,
			Redis: &config.RedisConfig{KeyPrefix: strings.TrimSuffix(srv.Prefix(t), ":")},
		}),
	}
	for _, s := range out {
		if err := s.RegisterTask("double", func(n int64) (int64, error) { return 2 * n, nil }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// What a machinery program calls on GetBackend() compiles with machinery's
// signatures and does what it did.
func TestBackendHasMachinerysMethods(t *testing.T) {
	t.Parallel()
	for name, s := range seamServers(t) {
		t.Run(name, func(t *testing.T) {
			var b backends.Backend = s.GetBackend()
			if b.IsAMQP() {
				t.Error("IsAMQP() = true")
			}
			sig := &tasks.Signature{UUID: "seam_" + name + "_" + t.Name(), Name: "double"}
			if _, err := b.GetState(sig.UUID); !errors.Is(err, backends.ErrStateNotFound) {
				t.Fatalf("GetState of an unknown task: %v, want ErrStateNotFound", err)
			}
			steps := []struct {
				write func() error
				want  string
			}{
				{func() error { return b.SetStatePending(sig) }, tasks.StatePending},
				{func() error { return b.SetStateReceived(sig) }, tasks.StateReceived},
				{func() error { return b.SetStateStarted(sig) }, tasks.StateStarted},
				{func() error { return b.SetStateRetry(sig) }, tasks.StateRetry},
				{func() error {
					return b.SetStateSuccess(sig, []*tasks.TaskResult{{Type: "int64", Value: int64(4)}})
				}, tasks.StateSuccess},
			}
			for _, step := range steps {
				if err := step.write(); err != nil {
					t.Fatalf("writing %s: %v", step.want, err)
				}
				st, err := b.GetState(sig.UUID)
				if err != nil || st.State != step.want {
					t.Fatalf("GetState after writing %s: %+v, %v", step.want, st, err)
				}
			}
			// result.NewAsyncResult on the backend reads the state written.
			out, err := result.NewAsyncResult(sig, b).GetWithTimeout(10*time.Second, time.Millisecond)
			if err != nil || len(out) != 1 || out[0].Int() != 4 {
				t.Fatalf("NewAsyncResult(sig, backend).GetWithTimeout: %v, %v", out, err)
			}
			if err := b.PurgeState(sig.UUID); err != nil {
				t.Fatal(err)
			}
			if _, err := b.GetState(sig.UUID); !errors.Is(err, backends.ErrStateNotFound) {
				t.Fatalf("GetState after PurgeState: %v, want ErrStateNotFound", err)
			}

			failed := &tasks.Signature{UUID: sig.UUID + "_failed", Name: "double"}
			if err := b.SetStateFailure(failed, "boom"); err != nil {
				t.Fatal(err)
			}
			if st, err := b.GetState(failed.UUID); err != nil || st.State != tasks.StateFailure || st.Error != "boom" {
				t.Fatalf("GetState after SetStateFailure: %+v, %v", st, err)
			}

			// Group bookkeeping and machinery's TriggerChord: true once.
			group := "seam_group_" + name
			members := []*tasks.Signature{
				{UUID: group + "_a", Name: "double", GroupUUID: group, GroupTaskCount: 2},
				{UUID: group + "_b", Name: "double", GroupUUID: group, GroupTaskCount: 2},
			}
			if err := b.InitGroup(group, []string{members[0].UUID, members[1].UUID}); err != nil {
				t.Fatal(err)
			}
			for i, m := range members {
				if done, err := b.GroupCompleted(group, 2); err != nil || done {
					t.Fatalf("GroupCompleted with %d of 2 done: %v, %v", i, done, err)
				}
				if err := b.SetStateSuccess(m, nil); err != nil {
					t.Fatal(err)
				}
			}
			if done, err := b.GroupCompleted(group, 2); err != nil || !done {
				t.Fatalf("GroupCompleted with 2 of 2 done: %v, %v", done, err)
			}
			states, err := b.GroupTaskStates(group, 2)
			if err != nil || len(states) != 2 || states[0].TaskUUID != members[0].UUID || !states[1].IsSuccess() {
				t.Fatalf("GroupTaskStates: %+v, %v", states, err)
			}
			for i, want := range []bool{true, false, false} {
				if got, err := b.TriggerChord(group); err != nil || got != want {
					t.Fatalf("TriggerChord call %d: %v, %v; want %v", i+1, got, err, want)
				}
			}
			if err := b.PurgeGroupMeta(group); err != nil {
				t.Fatal(err)
			}
			if _, err := b.GroupTaskStates(group, 2); !errors.Is(err, backends.ErrGroupNotFound) {
				t.Fatalf("GroupTaskStates after PurgeGroupMeta: %v, want ErrGroupNotFound", err)
			}
		})
	}
}

// What a machinery program calls on GetBroker() compiles with machinery's
// signatures and does what it did: the config, the registered names,
// routing keys, and StartConsuming / StopConsuming driving workers.
func TestBrokerHasMachinerysMethods(t *testing.T) {
	t.Parallel()
	for name, s := range seamServers(t) {
		t.Run(name, func(t *testing.T) {
			var b brokers.Broker = s.GetBroker()
			if b.GetConfig() != s.GetConfig() {
				t.Errorf("GetConfig() = %p, want the Server's %p", b.GetConfig(), s.GetConfig())
			}
			if !b.IsTaskRegistered("double") || b.IsTaskRegistered("triple") {
				t.Errorf("IsTaskRegistered: double %v, triple %v; want true, false",
					b.IsTaskRegistered("double"), b.IsTaskRegistered("triple"))
			}
			if err := s.RegisterTask("triple", func(n int64) (int64, error) { return 3 * n, nil }); err != nil {
				t.Fatal(err)
			}
			if !b.IsTaskRegistered("triple") {
				t.Error("IsTaskRegistered(triple) after RegisterTask = false")
			}
			b.SetRegisteredTaskNames([]string{"other"})
			if b.IsTaskRegistered("double") || !b.IsTaskRegistered("other") {
				t.Error("SetRegisteredTaskNames did not replace the names")
			}
			sig := &tasks.Signature{Name: "double"}
			b.AdjustRoutingKey(sig)
			if sig.RoutingKey != s.GetConfig().DefaultQueue {
				t.Errorf("AdjustRoutingKey: %q, want %q", sig.RoutingKey, s.GetConfig().DefaultQueue)
			}
			sig.RoutingKey = "custom"
			b.AdjustRoutingKey(sig)
			if sig.RoutingKey != "custom" {
				t.Errorf("AdjustRoutingKey changed a set key to %q", sig.RoutingKey)
			}

			// StopConsuming with nothing running, twice, is safe.
			b.StopConsuming()
			b.StopConsuming()

			// A launched worker runs through StartConsuming: StopConsuming
			// stops it, and LaunchAsync's channel receives nil.
			w := s.NewWorker("seams", 2)
			errs := make(chan error, 1)
			w.LaunchAsync(errs)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "double", Args: []tasks.Arg{{Type: "int64", Value: 4}}})
			if err != nil {
				t.Fatal(err)
			}
			if out, err := r.GetWithContext(ctx, time.Millisecond); err != nil || out[0].Int() != 8 {
				t.Fatalf("Get: %v, %v", out, err)
			}
			b.StopConsuming()
			select {
			case err := <-errs:
				if err != nil {
					t.Fatalf("LaunchAsync after StopConsuming: %v, want nil", err)
				}
			case <-ctx.Done():
				t.Fatal("the worker did not stop after StopConsuming")
			}

			// StartConsuming runs a worker in the caller's goroutine.
			w2 := s.NewWorker("seams-2", 2)
			started := make(chan struct{})
			stopped := make(chan error, 1)
			go func() {
				close(started)
				retry, err := b.StartConsuming("seams-2", 2, w2)
				if retry {
					err = errors.Join(err, errors.New("retry = true"))
				}
				stopped <- err
			}()
			<-started
			r, err = s.SendTaskWithContext(ctx, &tasks.Signature{Name: "double", Args: []tasks.Arg{{Type: "int64", Value: 5}}})
			if err != nil {
				t.Fatal(err)
			}
			if out, err := r.GetWithContext(ctx, time.Millisecond); err != nil || out[0].Int() != 10 {
				t.Fatalf("Get: %v, %v", out, err)
			}
			b.StopConsuming()
			select {
			case err := <-stopped:
				if err != nil {
					t.Fatalf("StartConsuming returned %v after StopConsuming", err)
				}
			case <-ctx.Done():
				t.Fatal("StartConsuming did not return after StopConsuming")
			}

			// A processor that cannot fetch by itself is refused, clearly.
			if _, err := b.StartConsuming("x", 1, foreignProcessor{}); err == nil || !strings.Contains(err.Error(), "foreignProcessor") {
				t.Fatalf("StartConsuming(foreign processor) = %v, want an error naming it", err)
			}
		})
	}
}

type foreignProcessor struct{}

func (foreignProcessor) Process(*tasks.Signature) error { return nil }
func (foreignProcessor) CustomQueue() string            { return "" }
func (foreignProcessor) PreConsumeHandler() bool        { return true }

// NewServerWithBrokerBackend validates the config as NewServer does, less
// the URLs; machinery's NewServerWithBrokerBackendLock, which has no error
// to return, makes a Server that refuses to send or run.
func TestServerOnCallersBrokerValidatesTheConfig(t *testing.T) {
	t.Parallel()
	base := newServer(t, &config.Config{Broker: "memory://", NoUnixSignals: true})
	bad := &config.Config{ResultsExpireIn: -1, Broker: "amqp://guest@localhost", NoUnixSignals: true}
	if _, err := machinery.NewServerWithBrokerBackend(bad, base.GetBroker(), base.GetBackend()); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "ResultsExpireIn") {
		t.Fatalf("NewServerWithBrokerBackend(ResultsExpireIn -1) = %v, want config.ErrInvalid naming the field", err)
	}
	// The URLs name nothing here: an AMQP one is not refused.
	ok := &config.Config{Broker: "amqp://guest@localhost", NoUnixSignals: true}
	if _, err := machinery.NewServerWithBrokerBackend(ok, base.GetBroker(), base.GetBackend()); err != nil {
		t.Fatalf("NewServerWithBrokerBackend with an unused AMQP URL: %v", err)
	}

	lock := machinistLock(t)
	s := machinery.NewServerWithBrokerBackendLock(bad, base.GetBroker(), base.GetBackend(), lock)
	if _, err := s.SendTask(&tasks.Signature{Name: "double"}); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("SendTask on a Server with a refused config = %v, want config.ErrInvalid", err)
	}
	group, _ := tasks.NewGroup(&tasks.Signature{Name: "double"})
	if _, err := s.SendGroup(group, 0); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("SendGroup on a Server with a refused config = %v, want config.ErrInvalid", err)
	}
	if err := s.NewWorker("w", 1).Launch(); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("Launch on a Server with a refused config = %v, want config.ErrInvalid", err)
	}

	good := machinery.NewServerWithBrokerBackendLock(&config.Config{NoUnixSignals: true}, base.GetBroker(), base.GetBackend(), lock)
	if err := good.RegisterTask("double", func(n int64) (int64, error) { return 2 * n, nil }); err != nil {
		t.Fatal(err)
	}
	w := good.NewWorker("w", 1)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	defer func() {
		w.Quit()
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}()
	r, err := good.SendTask(&tasks.Signature{Name: "double", Args: []tasks.Arg{{Type: "int64", Value: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.GetWithTimeout(30*time.Second, time.Millisecond); err != nil || out[0].Int() != 6 {
		t.Fatalf("Get: %v, %v", out, err)
	}
}

func machinistLock(t *testing.T) lockiface.Lock {
	t.Helper()
	lock, err := machinery.LockFactory(&config.Config{Lock: "eager"})
	if err != nil {
		t.Fatal(err)
	}
	return lock
}

// machinery's Quit is the broker's StopConsuming: one called right after
// LaunchAsync, before the worker's goroutine has begun, stops the worker.
func TestStopConsumingRightAfterLaunchAsync(t *testing.T) {
	t.Parallel()
	for name, s := range seamServers(t) {
		t.Run(name, func(t *testing.T) {
			for range 20 {
				w := s.NewWorker("stopped-at-once", 1)
				errs := make(chan error, 1)
				w.LaunchAsync(errs)
				s.GetBroker().StopConsuming()
				select {
				case err := <-errs:
					if err != nil {
						t.Fatalf("LaunchAsync after StopConsuming: %v, want nil", err)
					}
				case <-time.After(30 * time.Second):
					w.Quit()
					t.Fatal("StopConsuming right after LaunchAsync did not stop the worker")
				}
			}
		})
	}
}

// Eager mode runs each task as it is sent: it cannot hold members for an
// aggregate, and says so rather than running a member alone.
func TestEagerRefusesAggregationMembers(t *testing.T) {
	t.Parallel()
	s := newServer(t, &config.Config{Broker: "eager", ResultBackend: "eager"})
	if err := s.RegisterTask("notify", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	_, err := s.SendTask(&tasks.Signature{Name: "notify", AggregationKey: "alice"})
	if !errors.Is(err, brokers.ErrNoAggregator) || !strings.Contains(err.Error(), "eager") {
		t.Fatalf("SendTask of a member in eager mode: %v, want ErrNoAggregator saying why", err)
	}
}
