package rdb

import (
	"context"
	"log/slog"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// watchOpTimeout bounds one SUBSCRIBE or UNSUBSCRIBE of the watch.
const watchOpTimeout = 5 * time.Second

// finishWatch carries notices that task states became final to the results
// waiting for them, on a single server: whatever writes a final state
// PUBLISHes on the state key's own name (lib/state.lua's notify_final, and
// queueState), and one subscription per store, opened by the first watch,
// subscribes to the state keys of the tasks waited for. The same
// subscription carries the wakes of the queues' maintainers (WatchDue).
//
// A waiter reads the state once it watches: a state that became final
// before its subscription took effect is seen by that read, or by the
// read the confirmation's notice asks for (every SUBSCRIBE confirmation,
// a reconnection's too, sends the channel's waiters a notice). A notice
// only says "read the state now": one lost to a dropped connection leaves
// the waiter to its poll. No caller waits on Redis here: SUBSCRIBE and
// UNSUBSCRIBE go out in order from a goroutine of their own.
type finishWatch struct {
	mu      sync.Mutex
	ps      *goredis.PubSub // nil until the first watch
	waiters map[string]map[chan struct{}]struct{}
	ops     []watchOp     // SUBSCRIBEs and UNSUBSCRIBEs to send, in order
	kick    chan struct{} // tells the sender ops are waiting
	stopped chan struct{} // closed by close
	closed  bool
}

// watchOp is a SUBSCRIBE (subscribe) or UNSUBSCRIBE of channel.
type watchOp struct {
	channel   string
	subscribe bool
}

// WatchFinished starts watching task taskUUID: from when it returns, the
// channel receives when the task's state may have become final. stop ends
// the watch. Off a single server (Cluster, Ring) it returns a nil channel:
// waits there poll. It does not wait for Redis.
func (s *Store) WatchFinished(ctx context.Context, taskUUID string) (notices <-chan struct{}, stop func()) {
	return s.watchChannel(ctx, s.keys.state(taskUUID))
}

// WatchGraph starts watching workflow id: the scripts that make its graph
// final (graph_done.lua, graph_fail.lua, ack_success.lua) publish on its
// graph hash's name. Off a single server it returns a nil channel.
func (s *Store) WatchGraph(ctx context.Context, id string) (notices <-chan struct{}, stop func()) {
	return s.watchChannel(ctx, s.keys.graph(id).meta)
}

// WatchDue starts watching queue q for what comes due before its
// maintainer's plan (Forward with most > 0, lib/due.lua): from when it
// returns, the channel receives when Forward should run now, and once
// when the subscription takes effect (a reconnection's too), as
// something may have come due unannounced meanwhile. stop ends the watch.
// Off a single server it returns a nil channel: maintainers poll there.
func (s *Store) WatchDue(ctx context.Context, q string) (notices <-chan struct{}, stop func()) {
	return s.watchChannel(ctx, s.keys.queue(q).fwake)
}

// watchChannel starts watching channel: it receives a notice for every
// message and every confirmation of the channel's SUBSCRIBE.
func (s *Store) watchChannel(ctx context.Context, channel string) (notices <-chan struct{}, stop func()) {
	if !s.oneNode {
		return nil, func() {}
	}
	w := &s.watch
	notice := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, func() {}
	}
	if w.ps == nil {
		// No channel yet: nothing is sent until the first SUBSCRIBE.
		w.ps = s.client.Subscribe(context.WithoutCancel(ctx))
		w.waiters = make(map[string]map[chan struct{}]struct{})
		w.kick = make(chan struct{}, 1)
		w.stopped = make(chan struct{})
		go w.receive(w.ps.ChannelWithSubscriptions())
		go w.send(w.ps, s.log)
	}
	c := w.waiters[channel]
	if c == nil {
		c = make(map[chan struct{}]struct{})
		w.waiters[channel] = c
		w.queueLocked(watchOp{channel: channel, subscribe: true})
	}
	c[notice] = struct{}{}
	return notice, func() { w.remove(channel, notice) }
}

// queueLocked queues op for the sender.
func (w *finishWatch) queueLocked(op watchOp) {
	w.ops = append(w.ops, op)
	select {
	case w.kick <- struct{}{}:
	default: // the sender has been told already
	}
}

// send sends the queued SUBSCRIBEs and UNSUBSCRIBEs, in order, until close.
// A SUBSCRIBE that fails stays in go-redis's set of channels: it is sent
// again when the subscription reconnects.
func (w *finishWatch) send(ps *goredis.PubSub, log *slog.Logger) {
	for {
		select {
		case <-w.stopped:
			return
		case <-w.kick:
		}
		w.mu.Lock()
		ops := w.ops
		w.ops = nil
		w.mu.Unlock()
		for _, op := range ops {
			ctx, cancel := context.WithTimeout(context.Background(), watchOpTimeout)
			var err error
			if op.subscribe {
				err = ps.Subscribe(ctx, op.channel)
			} else {
				err = ps.Unsubscribe(ctx, op.channel)
			}
			cancel()
			if err != nil {
				log.Debug("watching task states: a subscription change failed; results poll meanwhile",
					slog.String("channel", op.channel), slog.Bool("subscribe", op.subscribe), slog.Any("error", err))
			}
		}
	}
}

// receive hands the subscription's messages on until it is closed: a
// message, or a confirmation of a SUBSCRIBE, is a notice to the channel's
// waiters.
func (w *finishWatch) receive(msgs <-chan interface{}) {
	for msg := range msgs {
		var channel string
		switch m := msg.(type) {
		case *goredis.Message:
			channel = m.Channel
		case *goredis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			channel = m.Channel
		default:
			continue
		}
		w.mu.Lock()
		for n := range w.waiters[channel] {
			select {
			case n <- struct{}{}:
			default: // a notice is already waiting
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
	if _, ok := c[notice]; !ok {
		return
	}
	delete(c, notice)
	if len(c) > 0 {
		return
	}
	delete(w.waiters, channel)
	if !w.closed {
		w.queueLocked(watchOp{channel: channel})
	}
}

// close ends the subscription; later watches return nil channels.
func (w *finishWatch) close() {
	w.mu.Lock()
	if w.closed || w.ps == nil {
		w.closed = true
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.stopped)
	ps := w.ps
	w.mu.Unlock()
	_ = ps.Close() // outside the lock: it may wait for a SUBSCRIBE in flight
}
