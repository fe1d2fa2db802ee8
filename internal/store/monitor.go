package store

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// Monitor is a broker that keeps what operators look at (the machinist
// command and the dashboard): the worker processes alive, and for each
// queue how many tasks its workers finished and how many of those failed,
// period by period over the last StatsWindow. Workers report both with
// their heartbeat, so neither costs anything per task in the broker; a
// worker killed loses at most the counts of its last heartbeat interval.
type Monitor interface {
	// Heartbeat records w as alive until ttl from now, replacing what the
	// worker with w.ID reported before, and adds counts to their queues'
	// statistics (each to the period its At falls in). Counts older than
	// StatsWindow are dropped.
	Heartbeat(ctx context.Context, w *WorkerInfo, ttl time.Duration, counts ...StatCount) error
	// Unregister forgets the worker id at once (a worker that stops).
	Unregister(ctx context.Context, id string) error
	// Workers lists the workers alive (their last heartbeat's ttl has not
	// run out), by host, then process id, then started at.
	Workers(ctx context.Context) ([]*WorkerInfo, error)
	// QueueStats returns the counts of queue over the last StatsWindow.
	QueueStats(ctx context.Context, queue string) (*QueueStats, error)
	// QueueHistory returns the counts of queue by day (UTC) over the last
	// HistoryDays days, today last: the same counts as QueueStats, kept
	// longer, a few fields of one hash per queue.
	QueueHistory(ctx context.Context, queue string) ([]DayCount, error)
}

// HistoryDays is how many days Monitor.QueueHistory keeps, today
// included.
const HistoryDays = 30

// DayCount counts the tasks of a queue that finished on Day (its start,
// UTC), as StatCount counts them in a period.
type DayCount struct {
	Day       time.Time
	Processed int
	Failed    int
}

// HistoryDay returns the start (UTC) of the day t falls in.
func HistoryDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// WorkerInfo describes a worker process, as its heartbeat reports it.
type WorkerInfo struct {
	// ID names this run of the worker; Tag is the consumer tag it was
	// given (NewWorker's first argument).
	ID, Tag string
	Host    string
	PID     int
	// Queues are the queues it consumes.
	Queues      []string
	Concurrency int
	// Running lists the UUIDs of the tasks it runs; len(Running) is the
	// number of tasks in flight.
	Running []string
	// Names are the task names it has registered.
	Names     []string
	StartedAt time.Time
	// Seen is when the heartbeat was sent; Expires when the worker counts
	// as gone unless it beats again.
	Seen, Expires time.Time
}

// StatsPeriod is the length of the periods statistics are counted in, and
// StatsWindow how far back they are kept.
const (
	StatsPeriod = 10 * time.Second
	StatsWindow = time.Hour
)

// StatCount counts the tasks of Queue that finished in the StatsPeriod
// starting at At: Processed that ran to an outcome (success, failure, or
// failure with a retry to come), of which Failed ended in an error.
type StatCount struct {
	Queue     string
	At        time.Time
	Processed int
	Failed    int
}

// QueueStats are a queue's counts over the last StatsWindow.
type QueueStats struct {
	Queue string
	// Periods holds one count per StatsPeriod, oldest first, the last
	// being the period now runs in (partly over); periods in which nothing
	// finished count zero.
	Periods []StatCount
}

// Since sums the periods that start at or after t.
func (s *QueueStats) Since(t time.Time) (processed, failed int) {
	for _, p := range s.Periods {
		if !p.At.Before(t) {
			processed += p.Processed
			failed += p.Failed
		}
	}
	return processed, failed
}

// StatsOldest returns the start of the oldest period of the StatsWindow
// that ends in the period now falls in: counts of periods before it are
// dropped.
func StatsOldest(now time.Time) time.Time {
	return now.Truncate(StatsPeriod).Add(-StatsWindow + StatsPeriod)
}

// Clone returns a copy of w that shares no slice with it.
func (w *WorkerInfo) Clone() *WorkerInfo {
	cp := *w
	cp.Queues, cp.Running, cp.Names = slices.Clone(w.Queues), slices.Clone(w.Running), slices.Clone(w.Names)
	return &cp
}

// StatsPeriods returns the starts of the periods of the StatsWindow that
// ends in the period now falls in, oldest first.
func StatsPeriods(now time.Time) []time.Time {
	n := int(StatsWindow / StatsPeriod)
	last := now.Truncate(StatsPeriod)
	out := make([]time.Time, n)
	for i := range out {
		out[i] = last.Add(-time.Duration(n-1-i) * StatsPeriod)
	}
	return out
}

// SortWorkers orders ws as Monitor.Workers lists them: by host, process
// id, start, then ID.
func SortWorkers(ws []*WorkerInfo) {
	slices.SortFunc(ws, func(x, y *WorkerInfo) int {
		return cmp.Or(cmp.Compare(x.Host, y.Host), cmp.Compare(x.PID, y.PID), x.StartedAt.Compare(y.StartedAt), cmp.Compare(x.ID, y.ID))
	})
}
