// Package service gives every background loop of the library (forwarder,
// recoverer, heartbeat, announcer, scheduler, config reloader) one shape,
// after River's startstop:
//
//	type Service interface {
//		Start(ctx context.Context) error
//		Stop()
//	}
//
// Start launches the loop's goroutine and returns; Stop cancels it and
// returns once it has ended. Stop is safe before Start and more than once;
// it is final (Start after Stop returns ErrStopped), so that a Start racing
// with a shutdown cannot leave a goroutine nobody stops.
//
// A loop embeds Base, which implements Stop and the bookkeeping, and writes
// its Start around Base.StartInit. The loop itself waits on a timer or a
// ticker of an injected clock.Clock and on ctx.Done(), never in time.Sleep,
// so that Stop ends it at once and tests drive it with a clock.Fake.
//
// # Periodic work
//
// Most loops run one function every interval. Periodic (or RunEvery, to
// run it in a goroutine of one's own) does that with what every such loop
// needs:
//
//   - The function returns an error. After consecutive failures the next
//     run waits Backoff.Delay(n) — exponential, capped and jittered —
//     instead of the interval; a success resets it.
//   - Failures are logged by a FailureLog: the first at once, then at most
//     one line per interval while they go on ("forwarder failed 12 times
//     in the last 30s: <last error>"), then one line when it recovers. A
//     Redis outage gives a few lines, not one per run.
//   - An error caused by the loop's own cancellation is neither retried
//     nor logged.
//
// For example, a forwarder:
//
//	f.loop = service.NewPeriodic(service.PeriodicParams{
//		Name:     "forwarder",
//		Interval: time.Second,
//		RunFunc:  f.forward, // func(ctx context.Context) error
//		Backoff:  service.Backoff{Min: time.Second, Max: 30 * time.Second},
//		Archetype: f.archetype, // its logger and clock
//	})
//	if err := f.loop.Start(ctx); err != nil {
//		return err
//	}
//	defer f.loop.Stop()
//
// # Testing a loop
//
// RunEvery waits on a single timer that it arms again after each run. With
// a clock.Fake a test waits until the timer is armed, advances the clock,
// and waits until the timer is armed again: the run is over, with no sleep.
//
//	clk := clock.NewFake(start)
//	loop := service.NewPeriodic(service.PeriodicParams{Interval: time.Minute, RunFunc: run, Archetype: service.NewArchetype(nil, clk)})
//	loop.Start(ctx)
//	t.Cleanup(loop.Stop)
//	clk.BlockUntil(1)
//	clk.Advance(time.Minute)
//	clk.BlockUntil(1) // run has returned
//
// Started and Stopped, on every Base, are channels for tests to wait on.
package service
