package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/b6192125/machinist/internal/service"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// newAnnouncer returns the loop that announces the worker again every
// LeaseRenewInterval, beside the heartbeat so that a slow announcement
// never delays a lease renewal. An attempt may take until the last
// announcement lapses: on a slow Redis one that lands late still keeps the
// worker's names alive, where one cut at the interval would let them lapse.
func (w *Worker) newAnnouncer() *service.Periodic {
	interval := w.p.Config.LeaseRenewInterval
	return service.NewPeriodic(service.PeriodicParams{
		Name:      "announcement of the task names",
		Interval:  interval,
		Backoff:   service.Backoff{Min: interval, Max: interval, Jitter: -1},
		Archetype: w.arch,
		RunFunc: func(ctx context.Context) error {
			return w.announce(ctx, max(interval, w.arch.Clock.Until(w.announcedUntil())))
		},
	})
}

// announceFirst announces the worker before its first fetch, so that
// other workers reroute to it the tasks they lack from the start and sends
// of its aggregators' members are accepted once it has started. A failure
// is reported and tried again after a backoff, each attempt given twice the
// time of the one before (the first has a second, so that an unreachable
// Redis is reported soon), for up to a LeaseDuration; then
// the worker starts anyway and the announcer goes on trying.
func (w *Worker) announceFirst(ctx context.Context) {
	backoff := service.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	fails := w.arch.FailureLog("announcement of the task names")
	giveUp := w.arch.Clock.Now().Add(w.p.Config.LeaseDuration)
	timeout := time.Second
	for failures := 1; ; failures++ {
		err := w.announce(ctx, min(timeout, max(w.arch.Clock.Until(giveUp), time.Millisecond)))
		if err == nil {
			fails.Succeeded()
			return
		}
		if ctx.Err() != nil {
			return
		}
		w.reportError(err)
		fails.Failed(err)
		left := w.arch.Clock.Until(giveUp)
		if left <= 0 {
			w.arch.Logger.Warn("the worker starts without its task names announced; it goes on trying")
			return
		}
		if !w.sleep(ctx, min(backoff.Delay(failures), left)) {
			return
		}
		timeout *= 2
	}
}

// announce tells the broker the registry's task names (read again each
// time: tasks may be registered while the worker runs), for a
// LeaseDuration, and makes them the names the worker fetches with. It
// makes one attempt, of at most timeout.
func (w *Worker) announce(ctx context.Context, timeout time.Duration) error {
	names := brokers.NewTaskNames(w.p.Tasks.GetRegisteredTaskNames())
	w.names.Store(names)
	lapses := w.arch.Clock.Now().Add(w.p.Config.LeaseDuration)
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := w.store.Announce(actx, w.p.Queues, names, w.p.Config.LeaseDuration); err != nil {
		return fmt.Errorf("worker: announce the task names: %w", err)
	}
	if err := errors.Join(w.announceAggregators(actx), w.beat(actx, names.List(), w.p.Config.LeaseDuration)); err != nil {
		return err
	}
	w.announced.Store(lapses.UnixNano())
	return nil
}

// announcedUntil is when the last announcement lapses (the zero time
// before the first).
func (w *Worker) announcedUntil() time.Time {
	if n := w.announced.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}
