// Batcher sends the Redis commands of concurrent callers in
// shared pipelines: a group commit by flat combining. A caller that finds
// its lane idle sends its own commands at once, and then whatever other
// callers queued meanwhile; a caller that finds the lane busy queues its
// commands and waits. So an idle caller pays one round trip and nothing
// more, and under load many tasks' writes share one. A caller whose
// context cannot end sends on its own goroutine, and so does one whose
// deadline the client honours (rdb.NewClient's clients), with a pipeline
// of its own commands alone, bounded by that deadline; any other has a
// goroutine send for it. A caller stops waiting when its context ends
// (deadline.go): its commands are dropped if they were still waiting their
// turn, and otherwise go on with the pipeline that carries them.
//
// A Batcher has several lanes, each sending one pipeline at a time, so that
// encoding the next pipeline overlaps with Redis running the last. Every
// call names a key (a task's UUID), and the calls with the same key go
// through the same lane, in the order they were made: on a single Redis a
// lane's pipelines go out one after the other, each in order on one
// connection. (On Redis Cluster a pipeline is split by node, so only
// commands for the same node keep their order.) Run is the exception: its
// commands need no order, and it takes any idle lane.

package transport

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

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
	repl   Replicas // each pipeline ends with WAIT when set (replicas.go)
	// honours says the client bounds a call's reads and writes by its
	// context's deadline (ContextTimeoutEnabled).
	honours bool
	lanes   [Lanes]lane
	closed  atomic.Bool
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
	// taken says a sender took the op into a pipeline; gone says its
	// caller stopped waiting before that, so it is not sent. Both are
	// guarded by the lane's mu.
	taken, gone bool
}

// NewBatcher starts a Batcher on client, whose pipelines wait for
// replicas as repl says. Close stops it; the client is not closed.
func NewBatcher(client goredis.UniversalClient, repl Replicas) *Batcher {
	b := &Batcher{client: client, repl: repl, honours: honoursDeadlines(client)}
	for i := range b.lanes {
		b.lanes[i].idle = sync.NewCond(&b.lanes[i].mu)
	}
	return b
}

// honoursDeadlines reports whether client bounds a call's reads and
// writes by its context's deadline (ContextTimeoutEnabled, which
// rdb.NewClient sets).
func honoursDeadlines(client goredis.UniversalClient) bool {
	switch c := client.(type) {
	case *goredis.Client:
		return c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *goredis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Sending is how a caller that finds its lane idle sends.
type Sending int

const (
	// ByGoroutine: a goroutine started for it sends, so that the caller
	// can stop waiting at its context's end.
	ByGoroutine Sending = iota
	// Inline: the caller sends, on its own goroutine; its context cannot
	// end, so it waits for its replies anyway.
	Inline
	// InlineAlone: the caller sends its own commands alone, in a pipeline
	// its context's deadline bounds, then leaves the rest to a goroutine.
	InlineAlone
)

// SendingFor returns how a caller with ctx sends.
func (b *Batcher) SendingFor(ctx context.Context) Sending {
	if ctx.Done() == nil {
		return Inline
	}
	if _, ok := ctx.Deadline(); ok && b.honours {
		return InlineAlone
	}
	return ByGoroutine
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

// enqueue adds o to l. When l is idle, the caller becomes its sender, and
// sends as how says; with InlineAlone, ctx is the caller's.
func (b *Batcher) enqueue(ctx context.Context, l *lane, o *op, how Sending) bool {
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
	switch how {
	case Inline:
		b.send(l)
	case InlineAlone:
		b.sendAlone(ctx, l, o)
	default:
		go b.send(l)
	}
	return true
}

// sendAlone sends o, which heads l's queue (l was idle), in a pipeline of
// its own on ctx, its caller's, with a deadline the client honours, and
// leaves what was queued behind it to a goroutine.
func (b *Batcher) sendAlone(ctx context.Context, l *lane, o *op) {
	l.mu.Lock()
	if len(l.queue) == 0 || l.queue[0] != o { // not so: send as before
		l.mu.Unlock()
		b.send(l)
		return
	}
	l.queue = l.queue[1:]
	if len(l.queue) == 0 {
		l.queue = nil
	}
	o.taken = true
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	b.execOn(ctx, []*op{o})
	l.mu.Lock()
	if l.idleIfEmptyLocked() {
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	go b.send(l)
}

// idleIfEmptyLocked marks l as not sending, and wakes its waiters, if
// nothing is queued; it reports whether it did. l.mu is held.
func (l *lane) idleIfEmptyLocked() bool {
	if len(l.queue) > 0 {
		return false
	}
	l.sending = false
	l.idle.Broadcast()
	return true
}

// send sends l's queued ops, a pipeline at a time, until none are left.
func (b *Batcher) send(l *lane) {
	for {
		l.mu.Lock()
		if l.idleIfEmptyLocked() {
			l.mu.Unlock()
			return
		}
		n := min(len(l.queue), maxBatch)
		queued := l.queue[:n:n]
		l.queue = l.queue[n:]
		if len(l.queue) == 0 {
			l.queue = nil
		}
		batch := queued[:0]
		for _, o := range queued {
			if !o.gone { // its caller left: not sent
				o.taken = true
				batch = append(batch, o)
			}
		}
		l.mu.Unlock()
		if len(batch) > 0 {
			b.exec(batch)
		}
	}
}

// Client returns the client the Batcher sends on.
func (b *Batcher) Client() goredis.UniversalClient { return b.client }

// Pending is a caller's queued commands.
type Pending struct {
	o   *op
	l   *lane
	err error
}

// Submit queues fn's commands for the next pipeline of key's lane. When
// the lane is idle they go at once: sent before Submit returns when ctx
// cannot end (the caller is about to wait for them anyway), or when ctx
// has a deadline the client honours (in a pipeline of their own, which
// the deadline bounds), else by a goroutine started for them, so that the
// caller can stop waiting at ctx's end; otherwise the lane's current
// sender takes them. A ctx already ended queues nothing.
func (b *Batcher) Submit(ctx context.Context, key string, fn QueueFunc) *Pending {
	if err := Expired(ctx); err != nil {
		return &Pending{err: Unsent(err)}
	}
	o := &op{queue: fn, done: make(chan struct{})}
	l := b.lane(key)
	if !b.enqueue(ctx, l, o, b.SendingFor(ctx)) {
		return &Pending{err: ErrClosed}
	}
	return &Pending{o: o, l: l}
}

// Wait waits until the commands have run and returns them, or ctx's error
// when ctx ends first: commands still waiting for their pipeline are then
// dropped, and the error says they were not sent (ErrUnsent); those
// already sent go on, and the error says they may have run
// (ErrUnanswered).
func (p *Pending) Wait(ctx context.Context) ([]goredis.Cmder, error) {
	if p.err != nil {
		return nil, p.err
	}
	select {
	case <-p.o.done:
		return p.o.cmds, nil
	case <-ctx.Done():
	}
	p.l.mu.Lock()
	taken := p.o.taken
	p.o.gone = !taken
	p.l.mu.Unlock()
	if !taken {
		return nil, Unsent(ctx.Err())
	}
	select {
	case <-p.o.done: // answered meanwhile
		return p.o.cmds, nil
	default:
		return nil, Unanswered(ctx.Err())
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
	return b.enqueue(context.Background(), b.lane(key), &op{queue: fn, done: make(chan struct{}), after: after}, ByGoroutine)
}

// Run queues fn's commands, sending them at once when a lane is idle:
// key's lane, or else the next idle one after it (fn's commands need no
// order with anything else queued); when every lane is busy they go in
// key's lane's next pipeline. They go on the caller's goroutine when ctx,
// its context, cannot end, and otherwise on one started for them, so that
// the caller can stop waiting for after at ctx's end (the commands are
// sent all the same). after, when not nil, is called with them once they
// have run, on the goroutine that sends. It reports false when the
// batcher is closed. fn is called when the pipeline is built, so a caller
// can still add to what it queues until then.
func (b *Batcher) Run(ctx context.Context, key string, fn QueueFunc, after func(cmds []goredis.Cmder)) bool {
	o := &op{queue: fn, done: make(chan struct{}), after: after}
	// Not InlineAlone: fn may carry other callers' commands (a combined
	// publish), which the caller's deadline must not cut.
	how := ByGoroutine
	if ctx.Done() == nil {
		how = Inline
	}
	home := laneOf(key)
	for i := range uint32(Lanes) {
		if l := &b.lanes[(home+i)%Lanes]; b.claimIdle(l, o) {
			if how == Inline {
				b.send(l)
			} else {
				go b.send(l)
			}
			return true
		}
	}
	return b.enqueue(ctx, &b.lanes[home], o, how)
}

// RunAlone sends fn's commands alone in a pipeline on ctx, its caller's,
// whose deadline the client honours (SendingFor says InlineAlone), on the
// caller's goroutine, when a lane is idle (key's, or the next idle one
// after it), calls after with them, and reports true; when every lane is
// busy, or the batcher is closed, it queues nothing and reports false.
func (b *Batcher) RunAlone(ctx context.Context, key string, fn QueueFunc, after func(cmds []goredis.Cmder)) bool {
	o := &op{queue: fn, done: make(chan struct{}), after: after}
	home := laneOf(key)
	for i := range uint32(Lanes) {
		if l := &b.lanes[(home+i)%Lanes]; b.claimIdle(l, o) {
			b.sendAlone(ctx, l, o)
			return true
		}
	}
	return false
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
// error at once, as Pending.Wait says.
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

// exec sends batch in one pipeline. The pipeline runs on a context of its
// own, not on its callers': each may stop waiting at its own context's end
// (Pending.Wait), and the others still want their replies, as do the
// lane's next pipelines, which follow this one. Its reads are bounded by
// the client's read timeout and, with a client that honours context
// deadlines (rdb.NewClient's), the whole by execTimeout.
func (b *Batcher) exec(batch []*op) {
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	b.execOn(ctx, batch)
}

// execOn sends batch in one pipeline on ctx.
func (b *Batcher) execOn(ctx context.Context, batch []*op) {
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
	if Expired(ctx) != nil {
		for _, o := range batch {
			deadlineCut(ctx, o.cmds)
		}
	}
	for _, o := range batch {
		if o.after != nil {
			o.after(o.cmds)
		}
		close(o.done)
	}
}

// deadlineCut gives each of cmds that failed without a reply an error that
// also wraps ctx's, which has ended: a client that bounds its reads and
// writes by the context's deadline reports the ones it cut as i/o
// timeouts, and a caller tells a deadline by context.DeadlineExceeded.
func deadlineCut(ctx context.Context, cmds []goredis.Cmder) {
	for _, c := range cmds {
		err := c.Err()
		var reply goredis.Error
		if err == nil || err == goredis.Nil || errors.As(err, &reply) {
			continue
		}
		c.SetErr(Ended(ctx, err))
	}
}

// IsNoScript reports whether err says Redis does not have a script (after
// a restart, a failover or SCRIPT FLUSH): EVALSHA in a pipeline cannot fall
// back to EVAL, so the caller loads the script and tries again.
func IsNoScript(err error) bool {
	return goredis.HasErrorPrefix(err, "NOSCRIPT")
}

// RunScript runs script, which must be safe to run twice (retry.go),
// through the batcher with EVALSHA and, when Redis does not have it, once
// more directly (EVAL, which also loads it); it is sent again after an
// error that leaves unknown whether it ran.
func (b *Batcher) RunScript(ctx context.Context, key string, script *goredis.Script, keys []string, args ...interface{}) *goredis.Cmd {
	var cmd *goredis.Cmd
	err := Again(ctx, func() error {
		cmds, err := b.Submit(ctx, key, func(p goredis.Pipeliner) []goredis.Cmder {
			return []goredis.Cmder{script.EvalSha(ctx, p, keys, args...)}
		}).Wait(ctx)
		switch {
		case err != nil:
			cmd = errCmd(ctx, err)
		case IsNoScript(cmds[0].Err()):
			cmd = b.EvalDetached(ctx, false, script, keys, args)
		default:
			cmd = cmds[0].(*goredis.Cmd)
		}
		return cmd.Err()
	}, Retry{})
	if err != nil {
		cmd.SetErr(err)
	}
	return cmd
}

// RunSettle runs script, a settle script (retry.go), with args after
// its first argument, the "again" flag, through the batcher: go-redis never
// sends it twice, and after an error that leaves unknown whether it ran it
// is sent again, with the flag set to "1" (which makes it recognise its
// first run's settle), for as long as holds reports the lease held. It
// also reports whether it sent the script again.
func (b *Batcher) RunSettle(ctx context.Context, key string, script *goredis.Script, holds func() bool, keys []string, args ...interface{}) (cmd *goredis.Cmd, again bool) {
	args = append([]interface{}{"0"}, args...)
	cmd = b.RunOnce(ctx, key, script, keys, args, Retry{While: holds, Before: func(bool) { args[0], again = "1", true }})
	return cmd, again
}

// RunOnce sends script through the batcher as a command go-redis does not
// send a second time, and again as r says.
func (b *Batcher) RunOnce(ctx context.Context, key string, script *goredis.Script, keys []string, args []interface{}, r Retry) *goredis.Cmd {
	var cmd *goredis.Cmd
	err := Again(ctx, func() error {
		var once OnceCmd
		_, err := b.Submit(ctx, key, func(p goredis.Pipeliner) []goredis.Cmder {
			once = EvalShaOnce(ctx, script, keys, args)
			_ = p.Process(ctx, once)
			return []goredis.Cmder{once}
		}).Wait(ctx)
		switch {
		case err != nil:
			cmd = errCmd(ctx, err)
		case IsNoScript(once.Err()):
			cmd = b.EvalDetached(ctx, true, script, keys, args)
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
