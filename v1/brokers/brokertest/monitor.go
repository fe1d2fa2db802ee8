package brokertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// testGetTask: GetTask finds a task wherever it is in its queue, and
// ListTasks lists the tasks parked on their limit keys.
func testGetTask(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	pending := newSig(q, "pending")
	later := newSig(q, "later")
	eta := time.Now().Add(time.Hour)
	later.ETA = &eta
	l := tasks.Limit{Key: "k", Concurrency: 1}
	holder, parked := limited(q, "holder", l), limited(q, "parked", l)
	publish(t, b, holder, parked)
	taken := fetch(t, b, []string{q}, 10)
	wantOrder(t, "fetched", deliveryUUIDs(taken), []string{holder.UUID})
	publish(t, b, pending, later)

	get := func(uuid string, want brokers.TaskStatus) *brokers.TaskInfo {
		t.Helper()
		info, err := b.GetTask(ctx, q, uuid)
		if err != nil {
			t.Fatalf("GetTask(%s): %v", uuid, err)
		}
		if info.Status != want || info.Queue != q || info.Signature.UUID != uuid {
			t.Fatalf("GetTask(%s): status %q, queue %q, UUID %q; want %q, %q, %s", uuid, info.Status, info.Queue, info.Signature.UUID, want, q, uuid)
		}
		return info
	}
	sameSignature(t, "a pending task", get(pending.UUID, brokers.StatusPending).Signature, pending)
	if info := get(later.UUID, brokers.StatusScheduled); info.NextProcessAt.Sub(eta).Abs() > time.Millisecond {
		t.Fatalf("GetTask of a scheduled task: NextProcessAt %v, want %v", info.NextProcessAt, eta)
	}
	get(parked.UUID, brokers.StatusLimited)
	active := get(holder.UUID, brokers.StatusActive)
	if d := active.LeaseExpiresAt.Sub(taken[0].Lease.ExpiresAt()); d < -time.Second || d > time.Second {
		t.Fatalf("GetTask of an active task: lease ends %v, the delivery's at %v", active.LeaseExpiresAt, taken[0].Lease.ExpiresAt())
	}

	infos, err := b.ListTasks(ctx, q, brokers.StatusLimited, 0, 10)
	if err != nil || len(infos) != 1 || infos[0].Signature.UUID != parked.UUID || infos[0].Status != brokers.StatusLimited {
		t.Fatalf("ListTasks(limited): %v, %v; want %s", infos, err, parked.UUID)
	}
	if active, err := b.ListTasks(ctx, q, brokers.StatusActive, 0, 10); err != nil || len(active) != 1 || active[0].LeaseExpiresAt.IsZero() {
		t.Fatalf("ListTasks(active): %v, %v; want one with its lease's end", active, err)
	}

	must(t, "Archive", b.Archive(ctx, taken[0], "broken"))
	if info := get(holder.UUID, brokers.StatusArchived); info.LastError != "broken" {
		t.Fatalf("GetTask of an archived task: LastError %q, want the reason", info.LastError)
	}
	if infos, err := b.ListTasks(ctx, q, brokers.StatusLimited, 0, 10); err != nil || len(infos) != 0 {
		t.Fatalf("ListTasks(limited) once the slot freed: %v, %v; want none", infos, err)
	}
	for _, uuid := range []string{"task_never_sent", ""} {
		if _, err := b.GetTask(ctx, q, uuid); err == nil || (uuid != "" && !errors.Is(err, brokers.ErrTaskNotFound)) {
			t.Fatalf("GetTask(%q): %v, want ErrTaskNotFound", uuid, err)
		}
	}
	if _, err := b.GetTask(ctx, queueName(t, "other"), pending.UUID); !errors.Is(err, brokers.ErrTaskNotFound) {
		t.Fatalf("GetTask in another queue: %v, want ErrTaskNotFound", err)
	}
}

// testMonitor: heartbeats make a worker listed until they run out or it
// unregisters, and add their counts to their queues' statistics.
func testMonitor(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q, other := queueName(t, "q"), queueName(t, "other")
	started := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	long := &brokers.WorkerInfo{ID: "w_" + uuid.NewString(), Tag: "mailer", Host: "host-a", PID: 41,
		Queues: []string{q}, Concurrency: 8, Running: []string{"task_1", "task_2"}, Names: []string{"send"}, StartedAt: started}
	short := &brokers.WorkerInfo{ID: "w_" + uuid.NewString(), Tag: "indexer", Host: "host-a", PID: 42, Queues: []string{q}, StartedAt: started}
	now := time.Now()
	must(t, "Heartbeat", b.Heartbeat(ctx, long, time.Minute,
		brokers.StatCount{Queue: q, At: now, Processed: 3, Failed: 1},
		brokers.StatCount{Queue: q, At: now.Add(-brokers.StatsPeriod), Processed: 2},
		brokers.StatCount{Queue: q, At: now.Add(-2 * brokers.StatsWindow), Processed: 100},
		brokers.StatCount{Queue: other, At: now, Processed: 7, Failed: 7}))
	must(t, "Heartbeat", b.Heartbeat(ctx, short, 2*time.Second, brokers.StatCount{Queue: q, At: now, Processed: 1}))

	mine := func() []*brokers.WorkerInfo {
		ws, err := b.Workers(ctx)
		if err != nil {
			t.Fatalf("Workers: %v", err)
		}
		return slices.DeleteFunc(ws, func(w *brokers.WorkerInfo) bool { return w.ID != long.ID && w.ID != short.ID })
	}
	ws := mine()
	if len(ws) != 2 || ws[0].ID != long.ID || ws[1].ID != short.ID {
		t.Fatalf("Workers: %d of ours, want both, by process id", len(ws))
	}
	got := ws[0]
	if got.Tag != long.Tag || got.Host != long.Host || got.PID != long.PID || !slices.Equal(got.Queues, long.Queues) ||
		got.Concurrency != 8 || !slices.Equal(got.Running, long.Running) || !slices.Equal(got.Names, long.Names) || !got.StartedAt.Equal(started) {
		t.Fatalf("Workers: %+v, want %+v", got, long)
	}
	if got.Seen.IsZero() || got.Expires.Before(got.Seen.Add(50*time.Second)) {
		t.Fatalf("Workers: seen %v, expires %v; want a minute apart", got.Seen, got.Expires)
	}
	eventually(t, "a worker whose heartbeat ran out is no longer listed", func() bool { return len(mine()) == 1 })
	must(t, "Unregister", b.Unregister(ctx, long.ID))
	if ws := mine(); len(ws) != 0 {
		t.Fatalf("Workers after Unregister: %d of ours, want none", len(ws))
	}

	// Counts add up by period; those older than the window are dropped.
	must(t, "Heartbeat", b.Heartbeat(ctx, long, time.Minute, brokers.StatCount{Queue: q, At: now, Processed: 1, Failed: 1}))
	st, err := b.QueueStats(ctx, q)
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	if n := int(brokers.StatsWindow / brokers.StatsPeriod); len(st.Periods) != n || st.Queue != q {
		t.Fatalf("QueueStats: %d periods of %q, want %d of %q", len(st.Periods), st.Queue, n, q)
	}
	last := st.Periods[len(st.Periods)-1]
	// The heartbeats may straddle a period's end: count from both.
	if p, f := st.Since(now.Add(-brokers.StatsPeriod).Truncate(brokers.StatsPeriod)); p != 7 || f != 2 {
		t.Fatalf("QueueStats: %d processed, %d failed in the last periods, want 7 and 2", p, f)
	}
	if p, f := st.Since(time.Time{}); p != 7 || f != 2 {
		t.Fatalf("QueueStats: %d processed, %d failed in the window, want 7 and 2 (none from before it)", p, f)
	}
	if !last.At.Equal(time.Now().Truncate(brokers.StatsPeriod)) && !last.At.Equal(now.Truncate(brokers.StatsPeriod)) {
		t.Fatalf("QueueStats: the last period starts at %v, want the current one", last.At)
	}
	for i := 1; i < len(st.Periods); i++ {
		if st.Periods[i].At.Sub(st.Periods[i-1].At) != brokers.StatsPeriod {
			t.Fatalf("QueueStats: periods %v and %v are not one StatsPeriod apart", st.Periods[i-1].At, st.Periods[i].At)
		}
	}
	if st, err := b.QueueStats(ctx, other); err != nil {
		t.Fatalf("QueueStats(other): %v", err)
	} else if p, f := st.Since(time.Time{}); p != 7 || f != 7 {
		t.Fatalf("QueueStats(other): %d processed, %d failed, want 7 and 7", p, f)
	}
	// The same counts by day, the last HistoryDays days, today last.
	h, err := b.QueueHistory(ctx, q)
	if err != nil {
		t.Fatalf("QueueHistory: %v", err)
	}
	if len(h) != brokers.HistoryDays || !h[len(h)-1].Day.Equal(brokers.HistoryDay(time.Now())) {
		t.Fatalf("QueueHistory: %d days, the last %v; want %d, today last", len(h), h[len(h)-1].Day, brokers.HistoryDays)
	}
	processed, failed := 0, 0
	for _, d := range h {
		processed, failed = processed+d.Processed, failed+d.Failed
	}
	if processed != 7 || failed != 2 {
		t.Fatalf("QueueHistory: %d processed, %d failed, want 7 and 2", processed, failed)
	}
	if err := b.Heartbeat(ctx, &brokers.WorkerInfo{}, time.Minute); err == nil {
		t.Fatal("Heartbeat of a worker with no ID: no error")
	}
}
