// Package redisbatch sends the Redis commands of concurrent callers in
// shared pipelines: a group commit. A caller queues its commands and waits;
// one goroutine sends everything queued so far as one pipeline, so under
// load many tasks' writes cost one round trip, and an idle caller is sent at
// once, with no added delay.
//
// Commands of one Batcher run in the order they were queued: on a single
// Redis the pipelines go out one after the other, each in order on one
// connection. (On Redis Cluster a pipeline is split by node, so only
// commands for the same node keep their order.)
package redisbatch

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("redisbatch: closed")

// maxBatch bounds the callers one pipeline carries.
const maxBatch = 1024

// execTimeout bounds one pipeline's round trip.
const execTimeout = 30 * time.Second

// QueueFunc queues a caller's commands on p and returns them, so that Do
// can report their errors.
type QueueFunc func(p goredis.Pipeliner) []goredis.Cmder

// Batcher sends queued commands in pipelines. Safe for concurrent use.
type Batcher struct {
	client goredis.UniversalClient
	ops    chan *op

	mu     sync.RWMutex
	closed bool
	done   chan struct{}
}

type op struct {
	queue QueueFunc
	cmds  []goredis.Cmder
	done  chan struct{}
	after func(cmds []goredis.Cmder) // run by the sender once the commands ran
}

// New starts a Batcher on client. Close stops it; the client is not closed.
func New(client goredis.UniversalClient) *Batcher {
	b := &Batcher{client: client, ops: make(chan *op, maxBatch), done: make(chan struct{})}
	go b.run()
	return b
}

// Client returns the client the Batcher sends on.
func (b *Batcher) Client() goredis.UniversalClient { return b.client }

// Pending is a caller's queued commands.
type Pending struct {
	o   *op
	err error
}

// Submit queues fn's commands for the next pipeline without waiting.
func (b *Batcher) Submit(ctx context.Context, fn QueueFunc) *Pending {
	o := &op{queue: fn, done: make(chan struct{})}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return &Pending{err: ErrClosed}
	}
	select {
	case b.ops <- o:
		return &Pending{o: o}
	case <-ctx.Done():
		return &Pending{err: ctx.Err()}
	}
}

// Wait waits until the commands have run and returns them, or ctx's error
// when ctx ends first (the commands still run).
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
func (b *Batcher) Go(fn QueueFunc, after func(cmds []goredis.Cmder)) bool {
	o := &op{queue: fn, done: make(chan struct{}), after: after}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false
	}
	b.ops <- o
	return true
}

// Do queues fn's commands, waits until they have run, and returns the
// first error among them (goredis.Nil included). When ctx ends first, Do
// returns ctx's error, but the commands still run.
func (b *Batcher) Do(ctx context.Context, fn QueueFunc) error {
	return b.Submit(ctx, fn).Err(ctx)
}

// Close sends what is queued and stops. Safe to call more than once.
func (b *Batcher) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	close(b.ops)
	b.mu.Unlock()
	<-b.done
}

func (b *Batcher) run() {
	defer close(b.done)
	batch := make([]*op, 0, maxBatch)
	for {
		o, ok := <-b.ops
		if !ok {
			return
		}
		batch = append(batch[:0], o)
		// Let goroutines that are about to queue commands do so, so that
		// they share this round trip; with nothing else runnable this
		// returns at once.
		runtime.Gosched()
	drain:
		for len(batch) < maxBatch {
			select {
			case o, ok := <-b.ops:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		b.exec(batch)
	}
}

func (b *Batcher) exec(batch []*op) {
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	pipe := b.client.Pipeline()
	for _, o := range batch {
		o.cmds = o.queue(pipe)
	}
	_, _ = pipe.Exec(ctx) // each caller reads its own commands' errors
	for _, o := range batch {
		if o.after != nil {
			o.after(o.cmds)
		}
		close(o.done)
	}
}

// HashWrite is a write of a hash with a TTL, handed from the result
// backend to the broker so that a task's result and its acknowledgement can
// go in one script.
type HashWrite struct {
	Key       string
	Fields    []interface{} // field, value pairs
	CreatedAt string        // set as created_at only if the hash has none
	TTL       time.Duration
}

// IsNoScript reports whether err says Redis does not have a script (after
// a restart, a failover or SCRIPT FLUSH): EVALSHA in a pipeline cannot fall
// back to EVAL, so the caller loads the script and tries again.
func IsNoScript(err error) bool {
	return goredis.HasErrorPrefix(err, "NOSCRIPT")
}

// RunScript runs script through the batcher with EVALSHA and, when Redis
// does not have it, once more directly (EVAL, which also loads it).
func (b *Batcher) RunScript(ctx context.Context, script *goredis.Script, keys []string, args ...interface{}) *goredis.Cmd {
	cmds, err := b.Submit(ctx, func(p goredis.Pipeliner) []goredis.Cmder {
		return []goredis.Cmder{script.EvalSha(ctx, p, keys, args...)}
	}).Wait(ctx)
	if err != nil {
		cmd := goredis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	cmd := cmds[0].(*goredis.Cmd)
	if IsNoScript(cmd.Err()) {
		return script.Run(ctx, b.client, keys, args...)
	}
	return cmd
}
