package memory_test

import (
	"context"
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/brokers/brokertest"
	"github.com/b6192125/machinist/v1/brokers/memory"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	brokertest.Exercise(t, func(t *testing.T, cnf *config.Config) brokertest.Broker {
		cnf.Logger = slog.New(slog.DiscardHandler)
		b := memory.New(memory.OptionsFrom(cnf))
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
}

func newBroker(t *testing.T, cnf *config.Config) *memory.Broker {
	t.Helper()
	b := memory.New(memory.OptionsFrom(cnf.WithDefaults()))
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// The memory broker keeps Go values as they were published: no JSON round
// trip turns an int into a json.Number.
func TestValuesKeptAsTheyAre(t *testing.T) {
	t.Parallel()
	b := newBroker(t, &config.Config{})
	ctx := context.Background()
	sig := &tasks.Signature{UUID: "task_values", Name: "add", RoutingKey: "q", Args: []tasks.Arg{
		{Type: "int64", Value: 1},
		{Type: "[]string", Value: []string{"a", "b"}},
	}}
	if err := b.Publish(ctx, sig); err != nil {
		t.Fatal(err)
	}
	ds, err := b.Fetch(ctx, []string{"q"}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := ds[0].Signature.Args
	if v, ok := args[0].Value.(int); !ok || v != 1 {
		t.Fatalf("Args[0].Value = %#v, want int 1", args[0].Value)
	}
	if v, ok := args[1].Value.([]string); !ok || len(v) != 2 || v[0] != "a" {
		t.Fatalf("Args[1].Value = %#v, want []string{a b}", args[1].Value)
	}
	if &v1(args)[0] == &v1(sig.Args)[0] {
		t.Fatal("the delivery shares its []string with the published signature")
	}
	if err := b.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
}

func v1(args []tasks.Arg) []string { return args[1].Value.([]string) }

func TestNilConfig(t *testing.T) {
	t.Parallel()
	b := memory.New(memory.OptionsFrom(nil))
	defer b.Close()
	if err := b.Publish(context.Background(), &tasks.Signature{UUID: "task_x", Name: "n", RoutingKey: config.DefaultQueueName}); err != nil {
		t.Fatal(err)
	}
	got, err := b.GetPendingTasks("")
	if err != nil || len(got) != 1 || got[0].UUID != "task_x" {
		t.Fatalf(`GetPendingTasks("") = %v, %v; want task_x from the default queue`, got, err)
	}
}

func TestConformancePaired(t *testing.T) {
	t.Parallel()
	brokertest.ExercisePaired(t, func(t *testing.T, cnf *config.Config) (brokertest.PairedBroker, backends.Backend) {
		b, be := memory.NewPair(memory.OptionsFrom(cnf))
		t.Cleanup(func() { _ = b.Close(); _ = be.Close() })
		return b, be
	})
}
