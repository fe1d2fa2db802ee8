// Batcher sends the Redis commands of concurrent callers in
// shared pipelines: a group commit by flat combining. A caller that finds
// its lane idle sends its own commands at once, on its own goroutine, and
// then whatever other callers queued meanwhile; a caller that finds the lane
// busy queues its commands and waits. So an idle caller pays one round trip
// and nothing more, and under load many tasks' writes share one.
//
// A Batcher has several lanes, each sending one pipeline at a time, so that
// encoding the next pipeline overlaps with Redis running the last. Every
// call names a key (a task's UUID), and the calls with the same key go
// through the same lane, in the order they were made: on a single Redis a
// lane's pipelines go out one after the other, each in order on one
// connection. (On Redis Cluster a pipeline is split by node, so only
// commands for the same node keep their order.) Run is the exception: its
// commands need no order, and it takes any idle lane.

package rdb

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// errBatcherClosed is returned by Do after Close.
var errBatcherClosed = errors.New("rdb: batcher closed")

// maxBatch bounds the callers one pipeline carries.
const maxBatch = 1024

// execTimeout bounds one pipeline's round trip.
const execTimeout = 30 * time.Second

// QueueFunc queues a caller's commands on p and returns them, so that Do
// can report their errors.
type QueueFunc func(p goredis.Pipeliner) []goredis.Cmder

// Lanes is how many pipelines a Batcher keeps in flight.
const Lanes = 8

// Batcher sends queued commands in pipelines. Safe for concurrent use.
type Batcher struct {
	client goredis.UniversalClient
	repl   replicas // each pipeline ends with WAIT when set (replicas.go)
	lanes  [Lanes]lane
	closed atomic.Bool
}

// lane is a queue of ops and whether some goroutine is sending them.
type lane struct {
	mu      sync.Mutex
	queue   []*op
	sending bool
	idle    *sync.Cond // signalled when sending ends, for Close
}

type op struct {
	queue QueueFunc
	cmds  []goredis.Cmder
	done  chan struct{}
	after func(cmds []goredis.Cmder) // run by the sender once the commands ran
}

// NewBatcher starts a Batcher on client. Close stops it; the client is not closed.
func NewBatcher(client goredis.UniversalClient) *Batcher {
	b := &Batcher{client: client}
	for i := range b.lanes {
		b.lanes[i].idle = sync.NewCond(&b.lanes[i].mu)
	}
	return b
}

// lane returns the lane of key.
func (b *Batcher) lane(key string) *lane {
	return &b.lanes[laneOf(key)]
}

// laneOf returns the index of key's lane (FNV-1a).
func laneOf(key string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return h % Lanes
}

// enqueue adds o to l. When l is idle, the caller becomes its sender: with
// wait it sends now, on its own goroutine (the caller waits anyway);
// without, a goroutine is started to send.
func (b *Batcher) enqueue(l *lane, o *op, wait bool) bool {
	l.mu.Lock()
	if b.closed.Load() {
		l.mu.Unlock()
		return false
	}
	l.queue = append(l.queue, o)
	if l.sending {
		l.mu.Unlock()
		return true
	}
	l.sending = true
	l.mu.Unlock()
	if wait {
		b.send(l)
	} else {
		go b.send(l)
	}
	return true
}

// send sends l's queued ops, a pipeline at a time, until none are left.
func (b *Batcher) send(l *lane) {
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.sending = false
			l.idle.Broadcast()
			l.mu.Unlock()
			return
		}
		n := min(len(l.queue), maxBatch)
		batch := l.queue[:n:n]
		l.queue = l.queue[n:]
		if len(l.queue) == 0 {
			l.queue = nil
		}
		l.mu.Unlock()
		b.exec(batch)
	}
}

// Client returns the client the Batcher sends on.
func (b *Batcher) Client() goredis.UniversalClient { return b.client }

// Pending is a caller's queued commands.
type Pending struct {
	o   *op
	err error
}

// Submit queues fn's commands for the next pipeline of key's lane. When
// the lane is idle it sends them before returning (the caller is about to
// wait for them anyway); otherwise the lane's current sender takes them.
func (b *Batcher) Submit(ctx context.Context, key string, fn QueueFunc) *Pending {
	if err := ctx.Err(); err != nil {
		return &Pending{err: err}
	}
	o := &op{queue: fn, done: make(chan struct{})}
	if !b.enqueue(b.lane(key), o, true) {
		return &Pending{err: errBatcherClosed}
	}
	return &Pending{o: o}
}

// Wait waits until the commands have run and returns them, or ctx's error
// when ctx ends first (queued commands still run).
func (p *Pending) Wait(ctx context.Context) ([]goredis.Cmder, error) {
	if p.err != nil {
		return nil, p.err
	}
	select {
	case <-p.o.done:
		return p.o.cmds, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Err waits like Wait and returns the first error among the commands
// (goredis.Nil included).
func (p *Pending) Err(ctx context.Context) error {
	cmds, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Go queues fn's commands without waiting for them; after, when not nil,
// is called with them once they have run (on the goroutine that sends, so
// it must be quick). It reports false when the batcher is closed.
func (b *Batcher) Go(key string, fn QueueFunc, after func(cmds []goredis.Cmder)) bool {
	return b.enqueue(b.lane(key), &op{queue: fn, done: make(chan struct{}), after: after}, false)
}

// Run queues fn's commands, sending them at once on the caller's
// goroutine when a lane is idle: key's lane, or else the next idle one
// after it (fn's commands need no order with anything else queued); when
// every lane is busy they go in key's lane's next pipeline. after, when
// not nil, is called with them once they have run, on the goroutine that
// sends. It reports false when the batcher is closed. fn is called when
// the pipeline is built, so a caller can still add to what it queues
// until then.
func (b *Batcher) Run(key string, fn QueueFunc, after func(cmds []goredis.Cmder)) bool {
	o := &op{queue: fn, done: make(chan struct{}), after: after}
	home := laneOf(key)
	for i := range uint32(Lanes) {
		if l := &b.lanes[(home+i)%Lanes]; b.claimIdle(l, o) {
			b.send(l)
			return true
		}
	}
	return b.enqueue(&b.lanes[home], o, true)
}

// claimIdle queues o on l and makes the caller l's sender, when l is idle:
// it reports whether it did.
func (b *Batcher) claimIdle(l *lane, o *op) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sending || b.closed.Load() {
		return false
	}
	l.queue = append(l.queue, o)
	l.sending = true
	return true
}

// Do queues fn's commands, waits until they have run, and returns the
// first error among them (goredis.Nil included). A ctx already ended
// queues nothing; one that ends while Do waits makes it return ctx's
// error, and the commands still run.
func (b *Batcher) Do(ctx context.Context, key string, fn QueueFunc) error {
	return b.Submit(ctx, key, fn).Err(ctx)
}

// Close refuses new commands and waits until what was queued has been
// sent. Safe to call more than once.
func (b *Batcher) Close() {
	b.closed.Store(true)
	for i := range b.lanes {
		l := &b.lanes[i]
		l.mu.Lock()
		for l.sending || len(l.queue) > 0 {
			if !l.sending { // queued before closed was seen: send it here
				l.sending = true
				l.mu.Unlock()
				b.send(l)
				l.mu.Lock()
				continue
			}
			l.idle.Wait()
		}
		l.mu.Unlock()
	}
}

func (b *Batcher) exec(batch []*op) {
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	pipe := b.client.Pipeline()
	for _, o := range batch {
		o.cmds = o.queue(pipe)
	}
	w := b.repl.wait(ctx, pipe)
	_, _ = pipe.Exec(ctx) // each caller reads its own commands' errors
	if err := b.repl.check(w); err != nil {
		for _, o := range batch {
			mark(o.cmds, err)
		}
	}
	for _, o := range batch {
		if o.after != nil {
			o.after(o.cmds)
		}
		close(o.done)
	}
}

// IsNoScript reports whether err says Redis does not have a script (after
// a restart, a failover or SCRIPT FLUSH): EVALSHA in a pipeline cannot fall
// back to EVAL, so the caller loads the script and tries again.
func IsNoScript(err error) bool {
	return goredis.HasErrorPrefix(err, "NOSCRIPT")
}

// RunScript runs script, which must be safe to run twice (see retry.go),
// through the batcher with EVALSHA and, when Redis does not have it, once
// more directly (EVAL, which also loads it); it is sent again after an
// error that leaves unknown whether it ran.
func (b *Batcher) RunScript(ctx context.Context, key string, script *goredis.Script, keys []string, args ...interface{}) *goredis.Cmd {
	var cmd *goredis.Cmd
	err := again(ctx, func() error {
		cmds, err := b.Submit(ctx, key, func(p goredis.Pipeliner) []goredis.Cmder {
			return []goredis.Cmder{script.EvalSha(ctx, p, keys, args...)}
		}).Wait(ctx)
		switch {
		case err != nil:
			cmd = errCmd(ctx, err)
		case IsNoScript(cmds[0].Err()):
			cmd = b.repl.eval(ctx, b.client, false, script, keys, args)
		default:
			cmd = cmds[0].(*goredis.Cmd)
		}
		return cmd.Err()
	}, retry{})
	if err != nil {
		cmd.SetErr(err)
	}
	return cmd
}

// RunSettle runs script, a settle script (see retry.go), with args after
// its first argument, the "again" flag, through the batcher: go-redis never
// sends it twice, and after an error that leaves unknown whether it ran it
// is sent again, with the flag set to "1" (which makes it recognise its
// first run's settle), for as long as holds reports the lease held. It
// also reports whether it sent the script again.
func (b *Batcher) RunSettle(ctx context.Context, key string, script *goredis.Script, holds func() bool, keys []string, args ...interface{}) (cmd *goredis.Cmd, again bool) {
	args = append([]interface{}{"0"}, args...)
	cmd = b.runOnce(ctx, key, script, keys, args, retry{while: holds, before: func(bool) { args[0], again = "1", true }})
	return cmd, again
}

// runOnce sends script through the batcher as a command go-redis does not
// send a second time, and again as r says.
func (b *Batcher) runOnce(ctx context.Context, key string, script *goredis.Script, keys []string, args []interface{}, r retry) *goredis.Cmd {
	var cmd *goredis.Cmd
	err := again(ctx, func() error {
		var once onceCmd
		_, err := b.Submit(ctx, key, func(p goredis.Pipeliner) []goredis.Cmder {
			once = evalShaOnce(ctx, script, keys, args)
			_ = p.Process(ctx, once)
			return []goredis.Cmder{once}
		}).Wait(ctx)
		switch {
		case err != nil:
			cmd = errCmd(ctx, err)
		case IsNoScript(once.Err()):
			cmd = b.repl.eval(ctx, b.client, true, script, keys, args)
		default:
			cmd = once.Cmd
		}
		return cmd.Err()
	}, r)
	if err != nil {
		cmd.SetErr(err)
	}
	return cmd
}
