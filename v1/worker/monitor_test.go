package worker

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// The heartbeat lists the worker with what it runs, reports the tasks it
// finished by outcome, and the worker is unlisted when it stops.
func TestHeartbeatReportsWorkerAndCounts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{LeaseRenewInterval: 20 * time.Millisecond})
	release := make(chan struct{})
	h.reg["ok"] = func() error { return nil }
	h.reg["bad"] = func() error { return errors.New("boom") }
	h.reg["hold"] = func() error { <-release; return nil }
	oks := []*tasks.Signature{newSig("ok"), newSig("ok")}
	bad := newSig("bad")
	hold := newSig("hold")
	h.publish(append(oks, bad, hold)...)
	p := h.params()
	p.Broker = h.mem // the spy hides the memory broker's Monitor
	p.Concurrency = 4
	r := h.start(p)
	ctx := context.Background()

	waitFor(t, "the worker to report the held task running", func() bool {
		ws, err := h.mem.Workers(ctx)
		return err == nil && len(ws) == 1 && slices.Equal(ws[0].Running, []string{hold.UUID})
	})
	ws, _ := h.mem.Workers(ctx)
	w := ws[0]
	host, _ := os.Hostname()
	if w.Tag != t.Name() || w.Host != host || w.PID != os.Getpid() || !slices.Equal(w.Queues, []string{testQueue}) ||
		w.Concurrency != 4 || !slices.Equal(w.Names, []string{"bad", "hold", "ok"}) || w.StartedAt.IsZero() {
		t.Fatalf("worker reported as %+v", w)
	}
	waitFor(t, "the finished tasks to be counted", func() bool {
		st, err := h.mem.QueueStats(ctx, testQueue)
		p, f := 0, 0
		if err == nil {
			p, f = st.Since(time.Time{})
		}
		return p == 3 && f == 1
	})
	close(release)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if ws, err := h.mem.Workers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("Workers after the worker stopped: %v, %v; want none", ws, err)
	}
	st, err := h.mem.QueueStats(ctx, testQueue)
	if err != nil {
		t.Fatal(err)
	}
	if p, f := st.Since(time.Time{}); p != 4 || f != 1 {
		t.Fatalf("counted %d processed, %d failed; want 4 and 1 (the last task's count reported as the worker stopped)", p, f)
	}
}
