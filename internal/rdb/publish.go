package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// PublishParams are what Store.Publish publishes.
type PublishParams struct {
	Tasks []*tasks.Signature
	// Pending makes each task PENDING once published.
	Pending bool
	// Fresh says the send made the UUID of its one task just now: no task
	// or state has it but what this publish's own attempt sent again
	// wrote, when it reached Redis first (store.SendParams.Fresh).
	Fresh bool
}

// Publish adds p.Tasks to their queues: one enqueue script per queue
// (which concurrent publishes share: combine.go), all or nothing within a
// queue. A task sent to a sharded queue goes to one of its shards, which
// its RoutingKey then names (shards.go).
// With p.Pending, each task is PENDING once published: on a single server
// that state is implicit (the task hash says it: GetState), elsewhere
// every PENDING state is written first, in a round trip of its own before
// the scripts, so a worker never finishes a task before its PENDING state
// lands.
// It returns when ctx ends, whatever Redis does, and its error wraps
// store.ErrMaybeSent when a task may have been published (sendOutcome),
// else store.ErrNotSent.
func (s *Store) Publish(ctx context.Context, p PublishParams) (err error) {
	sigs, pending := p.Tasks, p.Pending
	// tried: the error is an enqueue's, which says whether it may have
	// run; before, nothing of the tasks was sent. partly: a queue's tasks
	// were published.
	var tried, partly bool
	defer func() { err = sendOutcome(ctx, err, tried, partly) }()
	byQueue := make(map[string]*enqueueArgs)
	var order []string
	for _, sig := range sigs {
		if err := checkSig(sig); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		msg, err := s.message(sig)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		queue, err := s.route(ctx, sig)
		if err != nil {
			return fmt.Errorf("publish task %s: %w", sig.UUID, err)
		}
		sig.RoutingKey = queue
		q := byQueue[queue]
		if q == nil {
			q = &enqueueArgs{queue: s.keys.queue(queue), implicit: pending && s.oneNode, keyed: s.oneNode, groups: true,
				made: len(sigs) == 1 && p.Fresh}
			byQueue[queue] = q
			order = append(order, queue)
		}
		if err := s.addEncoded(q, sig, msg); err != nil {
			return fmt.Errorf("publish task %s: %w", sig.UUID, err)
		}
	}
	if pending && !s.oneNode {
		states, err := s.pendingWrites(ctx, sigs, tasks.NewPendingTaskState)
		if err != nil {
			return err
		}
		if err := s.batch.Do(ctx, sigs[0].UUID, states); err != nil {
			return fmt.Errorf("set state pending: %w", err)
		}
	}
	for _, name := range order {
		if err := s.registerQueue(ctx, name); err != nil {
			return err
		}
		tried = true
		if err := s.enqueue(ctx, name, byQueue[name]); err != nil {
			var r *replacedHolder
			if errors.As(err, &r) {
				for _, sig := range sigs {
					if sig.UUID == r.task {
						sig.UUID = r.holder // its result is the holder's
					}
				}
				partly = true
				continue
			}
			var nu *tasks.NotUniqueError
			if errors.As(err, &nu) {
				for _, sig := range sigs {
					if sig.UUID == nu.Task {
						nu.Key = tasks.UniqueKeyOf(sig)
					}
				}
			}
			return err
		}
		partly = true
	}
	return nil
}

// sendOutcome returns err, the error of a publish, wrapping ctx's error
// when ctx has ended, and store.ErrMaybeSent when some of its tasks may
// be queued (partly: a part of the publish went through before it failed;
// or err, an enqueue's error when tried, says it may have run: a request
// went out and its reply never came, or could not be read), else
// store.ErrNotSent: nothing went out, or Redis refused it.
func sendOutcome(ctx context.Context, err error, tried, partly bool) error {
	if err == nil {
		return nil
	}
	err = transport.Ended(ctx, err)
	if partly || tried && mayHaveRun(err) {
		return store.MaybeSent(err)
	}
	return store.NotSent(err)
}

// mayHaveRun reports whether err, the error of a call, leaves open that
// Redis ran it: unless its outcome is known to be unknown, only a call
// that was not sent (transport.ErrUnsent, the batcher closed) or that
// Redis refused (an error reply, but not one found inside a malformed
// reply) surely did not run.
func mayHaveRun(err error) bool {
	if transport.OutcomeUnknown(err) || errors.Is(err, ErrMalformedReply) {
		return true
	}
	var reply goredis.Error
	return !errors.Is(err, transport.ErrUnsent) && !errors.Is(err, transport.ErrClosed) && !errors.As(err, &reply)
}

// enqueueArgs gathers the tasks of one queue for enqueue.lua or, as next
// tasks, for ack_success.lua: for each task its id, message and ETA, with
// groups its aggregation group and unique key, and its limit.
type enqueueArgs struct {
	queue     *queueKeys
	lane      string // the first task's id, the batcher lane
	count     int    // tasks in tasks
	tasks     []interface{}
	stateKeys []string
	// implicit says the tasks' PENDING states are implicit (enqueue.lua).
	implicit bool
	// keyed gives enqueue.lua the state keys (on a single server), where
	// a repeat of a publish finds the state of a task that ran and was
	// forgotten.
	keyed bool
	// groups gives each task's aggregation group and unique key
	// (enqueue.lua).
	groups bool
	// made says the send made its one task's UUID (PublishParams.Fresh): no
	// task or state has it but what this publish's own attempt sent again
	// wrote, when it reached Redis first; enqueue.lua looks for no earlier
	// task, and for those with one EXISTS.
	made bool
}

// storedMessage encodes sig for its task hash: without its UUID and queue,
// which the hash's key and queue say (decodeStored puts them back), so
// that a small task's hash keeps Redis's compact encoding (a listpack while
// every value is at most hash-max-listpack-value, 64 bytes by default).
func storedMessage(sig *tasks.Signature) ([]byte, error) {
	c := *sig
	c.UUID, c.RoutingKey = "", ""
	return tasks.EncodeSignature(&c)
}

// decodeStored decodes msg, the message in the hash of task id of queue
// (storedMessage's, or a whole signature's).
func decodeStored(msg, id, queue string) (*tasks.Signature, error) {
	sig, err := tasks.DecodeSignature([]byte(msg))
	if err != nil {
		return nil, err
	}
	sig.UUID = id
	if sig.RoutingKey == "" {
		sig.RoutingKey = queue
	}
	return sig, nil
}

// message encodes sig, a task to send, for its task hash (storedMessage),
// refusing a message over Options.MaxMessageSize: the one place a task is
// encoded to be sent, before anything of it reaches Redis.
func (s *Store) message(sig *tasks.Signature) ([]byte, error) {
	msg, err := storedMessage(sig)
	if err != nil {
		return nil, fmt.Errorf("task %s (%s): %w", sig.UUID, sig.Name, err)
	}
	if err := store.CheckMessageSize(sig, msg, s.opts.MaxMessageSize); err != nil {
		return nil, err
	}
	return msg, nil
}

// addTask encodes sig (message) into q.
func (s *Store) addTask(q *enqueueArgs, sig *tasks.Signature) error {
	msg, err := s.message(sig)
	if err != nil {
		return err
	}
	return s.addEncoded(q, sig, msg)
}

// addEncoded adds sig, whose message is msg, to q.
func (s *Store) addEncoded(q *enqueueArgs, sig *tasks.Signature, msg []byte) error {
	var eta int64
	if sig.ETA != nil {
		eta = msOf(*sig.ETA)
	}
	if q.lane == "" {
		q.lane = sig.UUID
	}
	q.count++
	q.tasks = append(q.tasks, sig.UUID, msg, eta)
	if q.groups {
		g, err := memberGroup(sig)
		if err != nil {
			return err
		}
		u := ""
		if sig.UniqueFor > 0 {
			flag := " - "
			if sig.UniqueReplace {
				flag = " r "
			}
			u = strconv.FormatInt(max(sig.UniqueFor.Milliseconds(), 1), 10) + flag + q.queue.unique + tasks.UniqueKeyOf(sig)
		}
		q.tasks = append(q.tasks, g, u)
	}
	l, err := limitItem(q.queue, sig.Limit)
	if err != nil {
		return err
	}
	b, err := bandItem(sig)
	if err != nil {
		return err
	}
	q.tasks = append(q.tasks, l, b)
	if q.keyed {
		q.stateKeys = append(q.stateKeys, s.keys.state(sig.UUID))
	}
	return nil
}

// registerQueue adds q to the set of queues once per process.
func (s *Store) registerQueue(ctx context.Context, q string) error {
	s.mu.Lock()
	known := s.knownQueue[q]
	s.mu.Unlock()
	if known {
		return nil
	}
	// Not through the batcher, whose pipelines wait for replicas (with
	// MinReplicas): the set is bookkeeping, and the enqueue after it
	// waits for them.
	add := func() error { return s.client.SAdd(ctx, s.keys.queues(), q).Err() }
	if err := transport.Again(ctx, func() error { return transport.Detach(ctx, add) }, transport.Retry{}); err != nil {
		return fmt.Errorf("register queue %s: %w", q, err)
	}
	s.mu.Lock()
	s.knownQueue[q] = true
	s.mu.Unlock()
	return nil
}

// bandItem is the band of a task for the scripts (lib/band.lua): its
// priority level (tasks.MaxPriority at most) and fair key, "<level>" or
// "<level>:<key>", or "" for level 0 without a key.
func bandItem(sig *tasks.Signature) (string, error) {
	if len(sig.FairKey) > tasks.MaxFairKeySize {
		return "", fmt.Errorf("%w: task %s: %d bytes, more than %d", tasks.ErrBadFairKey, sig.UUID, len(sig.FairKey), tasks.MaxFairKeySize)
	}
	level := strconv.Itoa(min(int(sig.Priority), tasks.MaxPriority))
	switch {
	case sig.FairKey != "":
		return level + ":" + sig.FairKey, nil
	case level != "0":
		return level, nil
	}
	return "", nil
}

// limitItem is the limit of a task for the scripts (lib/limit.lua):
// "<concurrency> <rate> <period ms> <base>", or "" for none; a limit
// that cannot be applied is an error (tasks.ErrBadLimit).
func limitItem(qk *queueKeys, l *tasks.Limit) (string, error) {
	if l == nil {
		return "", nil
	}
	if err := l.Validate(); err != nil {
		return "", err
	}
	return strconv.Itoa(l.Concurrency) + " " + strconv.Itoa(l.Rate) + " " +
		strconv.FormatInt(l.Per.Milliseconds(), 10) + " " + qk.limit + l.Key, nil
}
