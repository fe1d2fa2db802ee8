package memory

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// With MaxRecoveries < 0 a task is never archived for losing its worker.
// The recoverer is driven with a clock an hour ahead, so the test does not
// wait for leases to run out.
func TestNegativeMaxRecoveriesNeverArchives(t *testing.T) {
	t.Parallel()
	b := New(Options{MaxRecoveries: -1, RecoverInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	defer b.Close()
	ctx := context.Background()
	if err := b.Publish(ctx, &tasks.Signature{UUID: "task_immortal", Name: "n", RoutingKey: "q"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		ds, err := b.Fetch(ctx, []string{"q"}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].Recovered != i {
			t.Fatalf("fetch %d: Recovered %d, want %d", i, ds[0].Recovered, i)
		}
		ds[0].Lease.Release() // stop its local timer; the broker decides here
		b.recoverExpired(time.Now().Add(time.Hour))
	}
	info, err := b.QueueInfo(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if info.Pending != 1 || info.Archived != 0 {
		t.Fatalf("after 10 recoveries: %+v, want the task pending, not archived", info)
	}
}

func TestDequeWrapsAround(t *testing.T) {
	var d deque
	var want []*task
	for i := 0; i < 20; i++ {
		tk := &task{seq: uint64(i)}
		if i%3 == 0 {
			d.pushFront(tk)
			want = append([]*task{tk}, want...)
		} else {
			d.pushBack(tk)
			want = append(want, tk)
		}
		if i%4 == 0 {
			if got := d.popFront(); got != want[0] {
				t.Fatalf("step %d: popFront = %d, want %d", i, got.seq, want[0].seq)
			}
			want = want[1:]
		}
	}
	if d.len() != len(want) {
		t.Fatalf("len = %d, want %d", d.len(), len(want))
	}
	for i, w := range want {
		if got := d.at(i); got != w {
			t.Fatalf("at(%d) = %d, want %d", i, got.seq, w.seq)
		}
	}
}

// recordingHandler keeps the records logged through it.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// level returns the level of the first record logged.
func (h *recordingHandler) level() slog.Level {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.records[0].Level
}

// attrs returns the attributes of the first record logged, or nil.
func (h *recordingHandler) attrs() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.records) == 0 {
		return nil
	}
	out := map[string]string{}
	h.records[0].Attrs(func(a slog.Attr) bool {
		out[a.Key] = a.Value.String()
		return true
	})
	return out
}

func TestRecoveryIsLogged(t *testing.T) {
	t.Parallel()
	h := &recordingHandler{}
	b := New(Options{RecoverInterval: time.Hour, Logger: slog.New(h)})
	defer b.Close()
	ctx := context.Background()
	if err := b.Publish(ctx, &tasks.Signature{UUID: "task_logged", Name: "n", RoutingKey: "q"}); err != nil {
		t.Fatal(err)
	}
	ds, err := b.Fetch(ctx, []string{"q"}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds[0].Lease.Release()
	b.recoverExpired(time.Now().Add(time.Hour))
	attrs := h.attrs()
	if attrs["task_id"] != "task_logged" || attrs["queue"] != "q" || attrs["recovered"] != "1" {
		t.Fatalf("recovery logged with %v, want task_id, queue and recovered", attrs)
	}
	if got := h.level(); got != slog.LevelWarn {
		t.Fatalf("recovery logged at %s, want WARN", got)
	}
}
