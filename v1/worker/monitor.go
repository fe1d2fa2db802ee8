package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// tally counts, per queue and statistics period, the tasks this worker
// finished, until its next heartbeat reports them (brokers.Monitor).
type tally struct {
	mu     sync.Mutex
	counts map[tallyKey]*brokers.StatCount
}

type tallyKey struct {
	queue string
	at    time.Time
}

// add counts a task of queue that finished at now with outcome.
func (t *tally) add(queue, outcome string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tallyKey{queue, now.Truncate(brokers.StatsPeriod)}
	c := t.counts[k]
	if c == nil {
		if t.counts == nil {
			t.counts = make(map[tallyKey]*brokers.StatCount)
		}
		// Counts no heartbeat took (none runs, as in eager mode) are
		// dropped once they are too old to be reported.
		oldest := store.StatsOldest(now)
		for old := range t.counts {
			if old.at.Before(oldest) {
				delete(t.counts, old)
			}
		}
		c = &brokers.StatCount{Queue: queue, At: k.at}
		t.counts[k] = c
	}
	c.Processed++
	if outcome != telemetry.OutcomeSuccess {
		c.Failed++
	}
}

// take returns the counts and starts again from zero.
func (t *tally) take() []brokers.StatCount {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]brokers.StatCount, 0, len(t.counts))
	for _, c := range t.counts {
		out = append(out, *c)
	}
	clear(t.counts)
	return out
}

// settled counts a task whose success, failure for good or retry was
// written: in the metrics, and, when the broker keeps statistics, for the
// next heartbeat's (a worker that never beats, such as eager mode's,
// keeps no counts).
func (w *Worker) settled(ctx context.Context, queue, name, outcome string) {
	queue = brokers.LogicalQueue(queue) // a shard counts for its queue
	w.p.Metrics.Settled(ctx, queue, name, outcome)
	if !w.unmonitored.Load() {
		w.tally.add(queue, outcome, w.arch.Clock.Now())
	}
}

// newIdentity returns what the heartbeat reports of this worker besides
// its running tasks.
func (w *Worker) newIdentity() brokers.WorkerInfo {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return brokers.WorkerInfo{
		ID:          "worker_" + uuid.NewString(),
		Tag:         w.p.ConsumerTag,
		Host:        host,
		PID:         os.Getpid(),
		Queues:      slices.Clone(w.p.Queues),
		Concurrency: w.p.Concurrency,
	}
}

// beat reports the worker alive to a broker that keeps track
// (brokers.Monitor), with its running tasks, its task names, and the
// counts of the tasks it finished since the last beat, for ttl.
func (w *Worker) beat(ctx context.Context, names []string, ttl time.Duration) error {
	if w.unmonitored.Load() {
		return nil
	}
	info := w.identity
	info.Names = names
	w.mu.Lock()
	for r := range w.active {
		info.Running = append(info.Running, r.d.Signature.UUID)
	}
	w.mu.Unlock()
	slices.Sort(info.Running)
	if err := w.store.Heartbeat(ctx, &info, ttl, w.tally.take()...); err != nil {
		if errors.Is(err, store.ErrUnsupported) {
			w.unmonitored.Store(true)
			return nil
		}
		return fmt.Errorf("worker: report the worker alive: %w", err)
	}
	return nil
}

// unregister tells a broker that keeps track that the worker stopped.
func (w *Worker) unregister() {
	if w.unmonitored.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The counts of the last tasks first.
	if counts := w.tally.take(); len(counts) > 0 {
		info := w.identity
		_ = w.store.Heartbeat(ctx, &info, time.Millisecond, counts...)
	}
	if err := w.store.Unregister(ctx, w.identity.ID); err != nil {
		w.arch.Logger.Warn("unregistering the worker failed; it is listed until its heartbeat runs out", slog.Any("error", err))
	}
}
