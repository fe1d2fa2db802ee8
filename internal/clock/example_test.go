package clock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/b6192125/machinist/internal/clock"
)

// A loop that runs every minute, driven by a test without waiting a minute.
func ExampleFake() {
	clk := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan time.Time, 10)
	done := make(chan struct{})
	go func() { // the loop under test
		defer close(done)
		timer := clk.NewTimer(time.Minute)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C():
			}
			ran <- clk.Now()
			timer.Reset(time.Minute)
		}
	}()

	for range 3 {
		clk.BlockUntil(1) // the loop waits on its timer
		clk.Advance(time.Minute)
		fmt.Println((<-ran).Format(time.TimeOnly))
	}
	cancel()
	<-done
	// Output:
	// 00:01:00
	// 00:02:00
	// 00:03:00
}
