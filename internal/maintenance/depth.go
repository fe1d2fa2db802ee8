package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// depthEvery is the longest Depth reports sizes read earlier.
const depthEvery = 5 * time.Second

// depthCache is the queue's sizes as last read for the depth gauge, and
// when.
type depthCache struct {
	mu   sync.Mutex
	info *store.QueueInfo
	at   time.Time
}

// Depth returns, while the process maintains the queue, its sizes for the
// depth gauge, read at most depthEvery ago. When a read fails it returns
// the last sizes read, until they are 3 × depthEvery old. It returns nil
// when the process does not maintain the queue or has no sizes to report.
// It is safe to call from any goroutine.
func (m *Maintainer) Depth(ctx context.Context) *store.QueueInfo {
	if !m.active.Load() {
		return nil
	}
	d := &m.depth
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.info != nil && m.arch.Clock.Since(d.at) < depthEvery {
		return d.info
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	info, err := m.store.QueueInfo(rctx, m.queue) // a shard's own, when the queue is one
	if err != nil {
		m.arch.Logger.Debug("reading the queue's sizes for the depth gauge failed", slog.String("queue", m.queue), slog.Any("error", err))
		if m.arch.Clock.Since(d.at) >= 3*depthEvery {
			d.info = nil // too old to report
		}
		return d.info // the last known, if any
	}
	d.info, d.at = info, m.arch.Clock.Now()
	return info
}
