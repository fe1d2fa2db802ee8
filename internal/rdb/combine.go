package rdb

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Concurrent publishes to one queue share enqueue script runs: a publish
// joins the call that waits for a batcher lane, if one does, and the call
// is built only when the lane sends it, with every publish that joined
// meanwhile (enqueue.lua takes several independent publishes, each all or
// nothing). A publish that finds no call of its queue waiting opens one,
// which goes at once on any idle lane (Batcher.Run: on a goroutine of its
// own when the publish's context can end), so that concurrent
// publishes keep every lane busy before they wait; once every lane is
// busy, the call waits in its queue's lane (even if another lane frees
// first), and the fixed cost of a script run (the call, the server's
// clock, the aggregation policies read, the reply) is paid once per
// pipeline rather than once per publish.

// maxCombined bounds the tasks one combined call carries: a publish that
// would take a call past it opens the next.
const maxCombined = 256

// combiner holds the combined calls still taking publishes.
type combiner struct {
	mu   sync.Mutex
	open map[combineKey]*combined
}

// combineKey: the publishes of one call go to one queue and have the same
// shape (with or without PENDING states).
type combineKey struct {
	queue    string
	implicit bool
}

// combined is one enqueue call being gathered, then sent.
type combined struct {
	reqs  []*publishReq
	tasks int
	built bool          // the lane took it: no publish joins or leaves
	done  chan struct{} // closed once sent (or not sent: no publish left)
	err   error         // the call's error, after done
}

// publishReq is one publish in a combined call.
type publishReq struct {
	q     *enqueueArgs
	token string      // its publish token (enqueue.lua's pub)
	gone  bool        // its caller left before the call was built
	reply interface{} // its element of the call's reply, after done
}

// enqueue publishes q's tasks to queue name in a combined call, and on an
// error that leaves it unsent or unknown, alone, as enqueueAlone does.
// When ctx ends first it returns ctx's error at once, marked as not sent
// when the call had not been built (the publish leaves it), else as
// unanswered.
func (s *Store) enqueue(ctx context.Context, name string, q *enqueueArgs) error {
	if err := transport.Expired(ctx); err != nil {
		return transport.Unsent(fmt.Errorf("publish to queue %s: %w", name, err))
	}
	r := &publishReq{q: q, token: randomHex(8)}
	return s.await(ctx, name, s.join(ctx, name, r), []*publishReq{r})[0]
}

// await waits for c, a call to queue name, and returns the outcome of
// each of reqs, the caller's publishes in it. When ctx ends first it
// returns ctx's error at once, marked as not sent when the call had not
// been built (the publishes leave it), else as unanswered; after a
// failed call, each publish is sent again alone (enqueueAgain).
func (s *Store) await(ctx context.Context, name string, c *combined, reqs []*publishReq) []error {
	errs := make([]error, len(reqs))
	select {
	case <-c.done:
	case <-ctx.Done():
		s.comb.mu.Lock()
		built := c.built
		for _, r := range reqs {
			r.gone = !built // never sent
		}
		s.comb.mu.Unlock()
		var err error
		select {
		case <-c.done: // answered meanwhile
		default:
			if built {
				err = transport.Unanswered(fmt.Errorf("publish to queue %s: sent, no reply yet: %w", name, ctx.Err()))
			} else {
				err = transport.Unsent(fmt.Errorf("publish to queue %s: still waiting to be sent: %w", name, ctx.Err()))
			}
		}
		if err != nil {
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
	}
	if c.err != nil {
		if len(reqs) == 1 {
			errs[0] = s.enqueueAgain(ctx, name, reqs[0].q, reqs[0].token, c.err)
			return errs
		}
		var wg sync.WaitGroup
		for i, r := range reqs {
			wg.Go(func() { errs[i] = s.enqueueAgain(ctx, name, r.q, r.token, c.err) })
		}
		wg.Wait()
		return errs
	}
	for i, r := range reqs {
		errs[i] = publishOutcome(name, r.reply)
	}
	return errs
}

// publishOutcome is the error, or nil, that a publish's element of an
// enqueue reply says; a refusal is marked as not sent.
func publishOutcome(queue string, reply interface{}) error {
	code, id, holder, err := parseEnqueueReply(reply)
	if err != nil {
		return fmt.Errorf("publish to queue %s: %w", queue, err)
	}
	switch code {
	case statusNotUnique:
		// Store.Publish adds the key, which it knows from the signature.
		return &refusedTask{task: id, err: transport.Unsent(&tasks.NotUniqueError{Queue: queue, Task: id, Holder: holder})}
	case statusReplaced:
		return &replacedHolder{task: id, holder: holder}
	case statusCancelled:
		return &refusedTask{task: id, err: transport.Unsent(&store.CancelledError{Task: id, Reason: holder})}
	case statusDuplicate, statusNoAggregator:
		return &refusedTask{task: id, err: transport.Unsent(statusError(code, id))}
	}
	return statusError(code, id)
}

// refusedTask is the error of a publish that enqueue.lua refused because
// of one of its tasks (named task): nothing of the publish was written.
type refusedTask struct {
	task string
	err  error
}

func (e *refusedTask) Error() string { return e.err.Error() }
func (e *refusedTask) Unwrap() error { return e.err }

// join adds r to the call its queue's publishes are gathering, opening one
// (and queueing it with Batcher.Run, with ctx, the publish's context) when
// there is none or it is full. A publish whose deadline the client honours
// sends a call of its own at once when a lane is idle (Batcher.RunAlone),
// which no other publish joins: its deadline bounds the call.
func (s *Store) join(ctx context.Context, name string, r *publishReq) *combined {
	k := combineKey{queue: name, implicit: r.q.implicit}
	n := r.q.count
	if s.batch.SendingFor(ctx) == transport.InlineAlone {
		c := &combined{reqs: []*publishReq{r}, tasks: n, done: make(chan struct{})}
		build, after := s.callOf(c, k, r.q.queue)
		if s.batch.RunAlone(ctx, name, build, after) {
			return c
		}
	}
	s.comb.mu.Lock()
	c := s.comb.open[k]
	if c != nil && c.tasks+n <= maxCombined {
		c.reqs = append(c.reqs, r)
		c.tasks += n
		s.comb.mu.Unlock()
		return c
	}
	c = &combined{reqs: []*publishReq{r}, tasks: n, done: make(chan struct{})}
	if s.comb.open == nil {
		s.comb.open = make(map[combineKey]*combined)
	}
	s.comb.open[k] = c
	s.comb.mu.Unlock()
	build, after := s.callOf(c, k, r.q.queue)
	if !s.batch.Run(ctx, name, build, after) {
		// Closed: the publishes that joined meanwhile fail with it.
		s.comb.mu.Lock()
		c.built = true
		if s.comb.open[k] == c {
			delete(s.comb.open, k)
		}
		c.err = transport.ErrClosed
		s.comb.mu.Unlock()
		close(c.done)
	}
	return c
}

// callOf returns the functions that build c, a call of key k to queue qk,
// in a pipeline, and read its reply.
func (s *Store) callOf(c *combined, k combineKey, qk *queueKeys) (transport.QueueFunc, func([]goredis.Cmder)) {
	var cmd transport.OnceCmd
	var sent []*publishReq
	build := func(p goredis.Pipeliner) []goredis.Cmder {
		s.comb.mu.Lock()
		c.built = true
		if s.comb.open[k] == c {
			delete(s.comb.open, k)
		}
		for _, r := range c.reqs {
			if !r.gone {
				sent = append(sent, r)
			}
		}
		s.comb.mu.Unlock()
		if len(sent) == 0 {
			return nil
		}
		keys, args := enqueueCall(qk, sent)
		cmd = transport.EvalShaOnce(context.Background(), enqueueScript, keys, args)
		_ = p.Process(context.Background(), cmd)
		return []goredis.Cmder{cmd}
	}
	after := func([]goredis.Cmder) {
		defer close(c.done)
		if len(sent) == 0 {
			return
		}
		if c.err = cmd.Err(); c.err != nil {
			return
		}
		replies, err := parseEnqueueReplies(cmd.Val(), len(sent))
		if err != nil {
			c.err = err
			return
		}
		for i, r := range sent {
			r.reply = replies[i]
		}
	}
	return build, after
}

// enqueueAgain publishes q alone after its combined call failed with
// first: at once when Redis did not have the script or refused the call,
// marked as a repeat (its token finds a first run) when the call's outcome
// is unknown on a single server; on Cluster such an error is returned, as
// the publish may have happened (see transport/retry.go).
func (s *Store) enqueueAgain(ctx context.Context, name string, q *enqueueArgs, token string, first error) error {
	switch {
	case transport.IsNoScript(first):
	case !transport.Uncertain(first), transport.OutcomeUnknown(first) && !s.oneNode:
		return fmt.Errorf("publish to queue %s: %w", name, first)
	}
	err := s.enqueueAlone(ctx, name, q, token, s.oneNode && transport.OutcomeUnknown(first))
	if err != nil && transport.OutcomeUnknown(first) {
		return transport.WithUnknown(err, first)
	}
	return err
}

// enqueueAlone publishes q to queue name in a call of its own, sent again
// after errors as transport/retry.go says for enqueue; repeat marks it a
// repeat from the first attempt.
func (s *Store) enqueueAlone(ctx context.Context, name string, q *enqueueArgs, token string, repeat bool) error {
	r := &publishReq{q: q, token: token}
	keys, args := enqueueCall(q.queue, []*publishReq{r})
	if repeat {
		args[firstRepeatArg] = "1"
	}
	// go-redis does not send it again; machinist does, marked as a
	// repeat, on a single server, where a repeat finds the first run's
	// tasks, or their states once they ran and were forgotten. On Cluster
	// the states live on other nodes: a repeat after a lost reply could
	// queue again a task that ran meanwhile, so the publish is sent again
	// only after a refusal, and the error of a lost reply says it may have
	// happened.
	rt := transport.Retry{RefusedOnly: true}
	if s.oneNode {
		// A repeat only once an attempt may have run: after refusals
		// (READONLY, LOADING…) nothing did, and the publish is a first.
		rt = transport.Retry{Before: func(mayHaveRun bool) {
			if mayHaveRun {
				args[firstRepeatArg] = "1"
			}
		}}
	}
	cmd := s.batch.RunOnce(ctx, q.lane, enqueueScript, keys, args, rt)
	if err := cmd.Err(); err != nil {
		return fmt.Errorf("publish to queue %s: %w", name, err)
	}
	replies, err := parseEnqueueReplies(cmd.Val(), 1)
	if err != nil {
		return fmt.Errorf("publish to queue %s: %w", name, err)
	}
	return publishOutcome(name, replies[0])
}

// firstRepeatArg is the index, in enqueueCall's arguments (task prefix,
// implicit flag, the sender's clock, then each publish's token, repeat
// flag, …), of the first publish's repeat flag.
const firstRepeatArg = 4

// enqueueCall returns the keys and arguments of an enqueue.lua call that
// makes the publishes rs, all of one queue and shape, to qk, stamped with
// this process's clock; none is marked a repeat (a made one is marked
// "f": enqueueArgs.made).
func enqueueCall(qk *queueKeys, rs []*publishReq) ([]string, []interface{}) {
	keys := []string{qk.pending, qk.scheduled, qk.archived, qk.notify}
	items := 3
	for _, r := range rs {
		keys = append(keys, r.q.stateKeys...)
		items += 3 + len(r.q.tasks)
	}
	implicit := "0"
	if rs[0].q.implicit {
		implicit = "1"
	}
	args := make([]interface{}, 0, items)
	args = append(args, qk.task, implicit, strconv.FormatInt(time.Now().UnixMilli(), 10))
	for _, r := range rs {
		flag := "0"
		if r.q.made {
			flag = "f"
		}
		args = append(args, r.token, flag, r.q.count)
		args = append(args, r.q.tasks...)
	}
	return keys, args
}

// replacedHolder is the outcome of a publish whose one task debounced: it
// replaced the message and ETA of holder, which holds its unique key.
// Store.Publish turns it into success, the task's UUID becoming holder's.
type replacedHolder struct{ task, holder string }

func (r *replacedHolder) Error() string {
	return fmt.Sprintf("task %s replaced the message of task %s", r.task, r.holder)
}
