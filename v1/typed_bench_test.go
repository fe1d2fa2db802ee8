package machinery_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// benchServer is a memory:// Server whose worker runs add.
func benchServer(b *testing.B) *machinery.Server {
	b.Helper()
	s, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if err := s.RegisterTask("add", func(a, c int64) (int64, error) { return a + c, nil }); err != nil {
		b.Fatal(err)
	}
	w := s.NewWorker("bench", 4)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	b.Cleanup(func() { w.Quit(); <-errs })
	return s
}

// The typed send and result against the untyped: the same task, sent and
// waited for; the difference is NewSignatureOf against Arg literals and
// Get1 against GetWithContext and reflect.
func BenchmarkSendAndGetUntyped(b *testing.B) {
	s := benchServer(b)
	ctx := context.Background()
	for b.Loop() {
		sig := &tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: int64(1)}, {Type: "int64", Value: int64(2)}}}
		r, err := s.SendTaskWithContext(ctx, sig)
		if err != nil {
			b.Fatal(err)
		}
		values, err := r.GetWithContext(ctx, 5*time.Millisecond) // Get1's poll
		if err != nil || values[0].Int() != 3 {
			b.Fatal(values, err)
		}
	}
}

func BenchmarkSendAndGetTyped(b *testing.B) {
	s := benchServer(b)
	ctx := context.Background()
	for b.Loop() {
		sig, err := tasks.NewSignatureOf("add", int64(1), int64(2))
		if err != nil {
			b.Fatal(err)
		}
		r, err := s.SendTaskWithContext(ctx, sig)
		if err != nil {
			b.Fatal(err)
		}
		if sum, err := result.Get1[int64](ctx, r); err != nil || sum != 3 {
			b.Fatal(sum, err)
		}
	}
}
