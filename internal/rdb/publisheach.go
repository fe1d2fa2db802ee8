package rdb

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// eachCall is the most publishes PublishEach puts in one enqueue call.
const eachCall = 1000

// eachParallel is how many of PublishEach's calls are under way at once.
const eachParallel = 8

// PublishEach publishes each of sigs, PENDING (implicitly, on a single
// server only: OneNode), as Publish would publish it alone, and returns
// each one's error (nil: published), aligned with sigs. A queue's tasks
// go eachCall to an enqueue call: those with no unique key, limit or
// aggregation key as one publish, the others one publish each. A publish
// enqueue.lua refuses because of one task (a UUID already queued, a
// unique key held) writes nothing: that task gets the refusal, and the
// publish's other tasks go again, without it. A call that fails leaves
// its publishes to be sent again alone, as the combined calls of
// concurrent senders do, and its outcome is each of their tasks'.
func (s *Store) PublishEach(ctx context.Context, sigs []*tasks.Signature) []error {
	errs := make([]error, len(sigs))
	if !s.oneNode {
		for i := range errs {
			errs[i] = store.NotSent(errors.New("publish each: a single Redis server only"))
		}
		return errs
	}
	// The tasks of each queue, in calls of eachCall tasks at most.
	var calls [][]int
	open := make(map[string]int) // queue → its open call in calls
	for i, sig := range sigs {
		if err := s.eachRoute(ctx, sig); err != nil {
			errs[i] = store.NotSent(fmt.Errorf("publish task %s: %w", sig.UUID, err))
			continue
		}
		c, ok := open[sig.RoutingKey]
		if !ok || len(calls[c]) == eachCall {
			c = len(calls)
			open[sig.RoutingKey] = c
			calls = append(calls, nil)
		}
		calls[c] = append(calls[c], i)
	}
	sem := make(chan struct{}, eachParallel)
	var wg sync.WaitGroup
	for _, idx := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.publishCall(ctx, sigs, idx, errs)
		})
	}
	wg.Wait()
	for i, err := range errs {
		var nu *tasks.NotUniqueError
		if errors.As(err, &nu) {
			nu.Key = tasks.UniqueKeyOf(sigs[i])
		}
		if err != nil && !errors.Is(err, store.ErrNotSent) && !errors.Is(err, store.ErrMaybeSent) {
			errs[i] = sendOutcome(ctx, err, true, false)
		}
	}
	return errs
}

// publishCall publishes the tasks idx of sigs, all of one queue, setting
// their errs: the plain ones as one publish, sent again without each task
// it is refused for, the others one publish each.
func (s *Store) publishCall(ctx context.Context, sigs []*tasks.Signature, idx []int, errs []error) {
	name := sigs[idx[0]].RoutingKey
	var plain []int
	var parts [][]int
	for _, i := range idx {
		if sig := sigs[i]; sig.UniqueFor > 0 || sig.Limit != nil || sig.AggregationKey != "" {
			parts = append(parts, []int{i})
		} else {
			plain = append(plain, i)
		}
	}
	if len(plain) > 0 {
		parts = append(parts, plain)
	}
	for len(parts) > 0 {
		reqs := make([]*publishReq, 0, len(parts))
		var sent [][]int
		for _, part := range parts {
			q := &enqueueArgs{queue: s.keys.queue(name), implicit: true, keyed: true, groups: true}
			var err error
			for _, i := range part {
				if err = s.addMessage(q, sigs[i]); err != nil {
					break
				}
			}
			if err != nil { // only a task of its own can fail to encode
				for _, i := range part {
					errs[i] = store.NotSent(fmt.Errorf("publish task %s: %w", sigs[i].UUID, err))
				}
				continue
			}
			reqs = append(reqs, &publishReq{q: q, token: randomHex(8)})
			sent = append(sent, part)
		}
		if len(reqs) == 0 {
			return
		}
		parts = nil
		for j, err := range s.enqueueEach(ctx, name, reqs) {
			part := sent[j]
			var refused *refusedTask
			var replaced *replacedHolder
			switch {
			case errors.As(err, &replaced):
				sigs[part[0]].UUID = replaced.holder // alone in its publish: its result is the holder's
			case errors.As(err, &refused) && len(part) > 1:
				// Nothing of the publish was written: its other tasks go
				// again without the one it was refused for.
				var rest []int
				for _, i := range part {
					if sigs[i].UUID == refused.task {
						errs[i] = err
					} else {
						rest = append(rest, i)
					}
				}
				if len(rest) == len(part) { // not one of them: not expected
					for _, i := range part {
						errs[i] = err
					}
					continue
				}
				parts = append(parts, rest)
			default:
				for _, i := range part {
					errs[i] = err
				}
			}
		}
	}
}

// eachRoute checks sig and routes it (a shard of a sharded queue).
func (s *Store) eachRoute(ctx context.Context, sig *tasks.Signature) error {
	if err := checkSig(sig); err != nil {
		return err
	}
	queue, err := s.route(ctx, sig)
	if err != nil {
		return err
	}
	sig.RoutingKey = queue
	return nil
}

// addMessage encodes sig and adds it to q.
func (s *Store) addMessage(q *enqueueArgs, sig *tasks.Signature) error {
	msg, err := s.message(sig)
	if err != nil {
		return err
	}
	return s.addEncoded(q, sig, msg)
}

// enqueueEach publishes reqs, publishes of queue name, in one enqueue
// call of its own (concurrent senders do not join it), and returns each
// one's outcome (await).
func (s *Store) enqueueEach(ctx context.Context, name string, reqs []*publishReq) []error {
	if err := s.registerQueue(ctx, name); err != nil {
		errs := make([]error, len(reqs))
		for i := range errs {
			errs[i] = transport.Unsent(err)
		}
		return errs
	}
	c := &combined{reqs: reqs, tasks: len(reqs), done: make(chan struct{})}
	build, after := s.callOf(c, combineKey{queue: name, implicit: true}, reqs[0].q.queue)
	if !s.batch.Run(ctx, name, build, after) {
		errs := make([]error, len(reqs))
		for i := range errs {
			errs[i] = transport.Unsent(fmt.Errorf("publish to queue %s: %w", name, transport.ErrClosed))
		}
		return errs
	}
	return s.await(ctx, name, c, reqs)
}
