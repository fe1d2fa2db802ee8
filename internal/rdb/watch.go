package rdb

import (
	"context"
	"log/slog"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// watchArmWait bounds how long WatchFinished waits for Redis to confirm a
// subscription. A watch not yet confirmed may miss a notice; the waiter's
// poll covers it.
const watchArmWait = time.Second

// finishWatch carries notices that task states became final to the results
// waiting for them, on a single server: whatever writes a final state
// PUBLISHes on the state key's own name (lib/state.lua's notify_final, and
// queueState), and one subscription per store, opened by the first watch,
// subscribes to the state keys of the tasks waited for. A notice only says
// "read the state now": one lost to a reconnection or a failover leaves the
// waiter to its poll.
type finishWatch struct {
	mu      sync.Mutex
	ps      *goredis.PubSub // nil until the first watch, and after close
	waiters map[string]*watched
	closed  bool
}

// watched are the waiters of one channel (a state key).
type watched struct {
	notices map[chan struct{}]struct{}
	armed   chan struct{} // closed when Redis confirms the subscription
}

// WatchFinished starts watching task taskUUID: from when it returns, the
// channel receives when the task's state may have become final. stop ends
// the watch. Off a single server (Cluster, Ring) it returns a nil channel:
// waits there poll.
func (s *Store) WatchFinished(ctx context.Context, taskUUID string) (notices <-chan struct{}, stop func()) {
	if !s.oneNode {
		return nil, func() {}
	}
	w := &s.watch
	channel := s.keys.state(taskUUID)
	notice := make(chan struct{}, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, func() {}
	}
	if w.ps == nil {
		w.ps = s.client.Subscribe(context.WithoutCancel(ctx))
		w.waiters = make(map[string]*watched)
		go w.receive(w.ps.ChannelWithSubscriptions())
	}
	c := w.waiters[channel]
	if c == nil {
		c = &watched{notices: make(map[chan struct{}]struct{}), armed: make(chan struct{})}
		// Sent under the lock, so that a SUBSCRIBE and an UNSUBSCRIBE of
		// one channel reach Redis in the order the waiters came and went.
		if err := w.ps.Subscribe(ctx, channel); err != nil {
			w.mu.Unlock()
			s.log.Debug("watching a task's state failed; its result polls", slog.String("task_id", taskUUID), slog.Any("error", err))
			return nil, func() {}
		}
		w.waiters[channel] = c
	}
	c.notices[notice] = struct{}{}
	w.mu.Unlock()

	stop = func() { w.remove(channel, notice) }
	timer := time.NewTimer(watchArmWait)
	defer timer.Stop()
	select {
	case <-c.armed:
	case <-timer.C:
	case <-ctx.Done():
		stop()
		return nil, func() {}
	}
	return notice, stop
}

// receive hands the subscription's messages on until it is closed.
func (w *finishWatch) receive(msgs <-chan interface{}) {
	for msg := range msgs {
		w.mu.Lock()
		switch m := msg.(type) {
		case *goredis.Subscription:
			if c := w.waiters[m.Channel]; c != nil && m.Kind == "subscribe" {
				select {
				case <-c.armed:
				default:
					close(c.armed)
				}
			}
		case *goredis.Message:
			if c := w.waiters[m.Channel]; c != nil {
				for n := range c.notices {
					select {
					case n <- struct{}{}:
					default: // a notice is already waiting
					}
				}
			}
		}
		w.mu.Unlock()
	}
}

// remove ends the watch of notice on channel, unsubscribing when it was
// the channel's last.
func (w *finishWatch) remove(channel string, notice chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.waiters[channel]
	if c == nil {
		return
	}
	if _, ok := c.notices[notice]; !ok {
		return
	}
	delete(c.notices, notice)
	if len(c.notices) > 0 {
		return
	}
	delete(w.waiters, channel)
	if w.ps != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = w.ps.Unsubscribe(ctx, channel) // best effort: a stray message finds no waiter
	}
}

// close ends the subscription; later watches return nil channels.
func (w *finishWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.ps != nil {
		_ = w.ps.Close()
		w.ps = nil
	}
}
