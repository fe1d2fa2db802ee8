package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
)

// A loop that fails twice, backs off, and recovers, driven by a fake clock.
func ExamplePeriodic() {
	clk := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	n := 0
	loop := service.NewPeriodic(service.PeriodicParams{
		Name:     "forwarder",
		Interval: time.Minute,
		RunFunc: func(ctx context.Context) error {
			n++
			fmt.Println("run", n, "at", clk.Now().Format(time.TimeOnly))
			if n <= 2 {
				return errors.New("connection refused")
			}
			return nil
		},
		Backoff:   service.Backoff{Min: 5 * time.Second, Jitter: -1},
		Archetype: service.NewArchetype(logger, clk),
	})
	if err := loop.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer loop.Stop()

	for range 4 {
		clk.BlockUntil(1) // the loop waits on its timer
		next, _ := clk.NextDeadline()
		clk.Set(next) // run it
	}
	clk.BlockUntil(1) // the last run is over
	// Output:
	// run 1 at 00:01:00
	// level=ERROR msg="forwarder failed" error="connection refused"
	// run 2 at 00:01:05
	// run 3 at 00:01:15
	// level=INFO msg="forwarder recovered after failing twice" failures=2
	// run 4 at 00:02:15
}
