package rdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

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
	q.tasks = append(q.tasks, l)
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

// randomHex returns n random bytes in hex: fencing tokens (12 bytes),
// publish tokens (8: they only have to differ between publishes of the
// same task ids) and claim tokens.
func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}

// Dequeue takes up to n pending tasks of queue q under fresh leases. A
// message that cannot be decoded is returned with Delivery.Err set.
func (s *Store) Dequeue(ctx context.Context, q string, n int, names *store.TaskNames) ([]*store.Delivery, error) {
	qk := s.keys.queue(q)
	lease := s.opts.LeaseDuration
	args := make([]interface{}, 0, 3+n)
	args = append(args, qk.task, n, lease.Milliseconds())
	base := randomHex(12) // one random read per fetch; the index makes each token unique
	for i := 0; i < n; i++ {
		args = append(args, base+strconv.Itoa(i))
	}
	keys := []string{qk.pending, qk.paused, qk.lease, qk.notify}
	if names != nil {
		keys = append(keys, qk.rerouted, qk.names+names.Key())
	}
	start := time.Now()
	cmd := s.repl.Eval(ctx, s.client, true, dequeueScript, keys, args)
	if err := cmd.Err(); err != nil {
		if transport.OutcomeUnknown(err) {
			// The fetch may have taken tasks nobody will run: put them
			// back now rather than at the end of their leases.
			s.releaseFetch(ctx, q, base, start)
		}
		return nil, fmt.Errorf("fetch from queue %s: %w", q, err)
	}
	taken, err := parseDequeueReply(cmd.Val(), n)
	if err != nil {
		return nil, fmt.Errorf("fetch from queue %s: %w", q, err)
	}
	return s.deliveries(q, taken, start), nil
}

// deliveries makes the deliveries of tasks taken from queue q by a call
// begun at start. The local lease expiry is counted from start, so the
// worker gives a lease up no later than Redis does. A message that cannot
// be decoded is returned with Delivery.Err set.
func (s *Store) deliveries(q string, taken []dequeued, start time.Time) []*store.Delivery {
	localExpiry := start.Add(s.opts.LeaseDuration)
	var out []*store.Delivery
	for _, t := range taken {
		id := t.id
		d := &store.Delivery{
			Queue:     q,
			Lease:     store.NewLease(t.token, localExpiry),
			Retried:   t.retried,
			Recovered: t.recovered,
		}
		sig, err := decodeStored(t.msg, id, q)
		if err == nil && t.outcome != "" {
			d.Outcome = new(tasks.TaskState)
			if derr := decodeJSON(t.outcome, d.Outcome); derr != nil {
				err = fmt.Errorf("decode committed outcome: %w", derr)
			}
		}
		if err != nil {
			// The worker fails it with the reason (FAILURE, archive,
			// error handler): the id is all that is known of it.
			d.Signature = &tasks.Signature{UUID: id, RoutingKey: q}
			d.Err = fmt.Errorf("cannot decode task message: %w", err)
			out = append(out, d)
			continue
		}
		sig.UUID = id
		d.Signature = sig
		out = append(out, d)
	}
	return out
}

// releaseScanLimit bounds the leases releaseFetch looks at.
const releaseScanLimit = 100000

// releaseFetch puts back the tasks a fetch begun at start, with token
// base, took if its reply was lost (release_fetch.lua). It is best effort:
// when it fails too, those tasks come back when their leases end.
func (s *Store) releaseFetch(ctx context.Context, q, base string, start time.Time) {
	// The fetch's own context may be what ended it (its deadline cut the
	// reply off): the tasks are put back regardless, within a bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	qk := s.keys.queue(q)
	// The fetch set its leases at Redis's time, no earlier than start
	// (less a second for the clocks' difference).
	lowest := start.Add(s.opts.LeaseDuration - time.Second).UnixMilli()
	var n int64
	err := transport.Again(ctx, func() error {
		var err error
		n, err = s.repl.Eval(ctx, s.client, false, releaseScript, []string{qk.pending, qk.lease, qk.notify},
			[]interface{}{qk.task, base, lowest, releaseScanLimit}).Int64()
		return err
	}, transport.Retry{})
	if err != nil {
		s.log.Warn("putting back the tasks of a fetch whose reply was lost failed; they come back when their leases end",
			slog.String("queue", q), slog.Any("error", err))
		return
	}
	if n > 0 {
		s.log.Info("put back the tasks of a fetch whose reply was lost", slog.String("queue", q), slog.Int64("tasks", n))
	}
}

// Resignal leaves a wake-up token on queue's notify list (at most one), for
// a token taken but not used. It is best effort: without it an idle worker
// still looks within BlockTimeout.
func (s *Store) Resignal(queue string) {
	if queue == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	notify := s.keys.queue(queue).notify
	pipe := s.client.Pipeline()
	pipe.LPush(ctx, notify, "1")
	pipe.LTrim(ctx, notify, 0, 0)
	_, _ = pipe.Exec(ctx)
}

// blockTimeout is how long one BLPOP may block: BlockTimeout, but less than
// the client's read timeout and no later than ctx's deadline, because
// go-redis does not interrupt a blocking command when ctx ends.
func (s *Store) blockTimeout(ctx context.Context) time.Duration {
	timeout := s.opts.BlockTimeout
	if read := s.readTimeout(); read > 0 {
		timeout = min(timeout, read/2)
	}
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	return max(timeout, 10*time.Millisecond)
}

// readTimeout is the client's own read timeout (the client may have been
// made by the caller, not from the config); 0 means none.
func (s *Store) readTimeout() time.Duration {
	var read time.Duration
	switch c := s.client.(type) {
	case *goredis.Client:
		read = c.Options().ReadTimeout
	case *goredis.ClusterClient:
		read = c.Options().ReadTimeout
	case *goredis.Ring:
		read = c.Options().ReadTimeout
	default:
		return 3 * time.Second
	}
	switch {
	case read == 0:
		return 3 * time.Second // go-redis's default
	case read < 0:
		return 0 // no timeout
	}
	return read
}

// blpop pops a wake-up token from one of keys, blocking up to timeout
// (BLPOP with a fractional timeout, which go-redis's BLPop rounds to whole
// seconds). It returns the key the token came from, or goredis.Nil when the
// time ran out.
func (s *Store) blpop(ctx context.Context, timeout time.Duration, keys ...string) (string, error) {
	args := make([]interface{}, 0, len(keys)+2)
	args = append(args, "blpop")
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, strconv.FormatFloat(timeout.Seconds(), 'f', 3, 64))
	cmd := s.client.Do(ctx, args...)
	if err := cmd.Err(); err != nil {
		return "", err
	}
	return parseBlpopReply(cmd.Val(), keys)
}

// Wait blocks until a wake-up token arrives on one of the queues' notify
// lists, or, with names, on the lists that wake the workers with those
// names for the tasks rerouted to them (route.go), or for at most
// BlockTimeout. It returns the queue whose token it took, or "" when the
// time ran out.
func (s *Store) Wait(ctx context.Context, queues []string, names *store.TaskNames) (string, error) {
	byNotify := make(map[string]string, len(queues))
	groups := make([][]string, 0, len(queues)) // by queue: one slot each
	for _, q := range queues {
		qk := s.keys.queue(q)
		keys := []string{qk.notify}
		if names != nil {
			keys = append(keys, qk.namesNotify(names))
		}
		for _, k := range keys {
			byNotify[k] = q
		}
		groups = append(groups, keys)
	}
	key, err := s.blpopAny(ctx, s.blockTimeout(ctx), groups)
	switch {
	case err == nil:
		return byNotify[key], nil
	case transport.Expired(ctx) != nil: // perhaps what cut the read
		return "", transport.Expired(ctx)
	}
	return "", fmt.Errorf("wait for tasks: %w", err)
}

// blpopAny takes a wake-up token from one of the lists of groups (each
// group's lists in one slot), waiting for at most timeout, and returns the
// list it came from, or "" when the time ran out. On a single server one
// BLPOP waits on them all; on Redis Cluster, where the groups live in
// different slots, one BLPOP per group waits in parallel and the first
// token is taken: a token another takes after that is given back to its
// list, for another worker.
func (s *Store) blpopAny(ctx context.Context, timeout time.Duration, groups [][]string) (string, error) {
	if !s.cluster || len(groups) == 1 {
		var keys []string
		for _, g := range groups {
			keys = append(keys, g...)
		}
		key, err := s.blpop(ctx, timeout, keys...)
		if errors.Is(err, goredis.Nil) {
			return "", nil
		}
		return key, err
	}
	type wake struct {
		key string
		err error
	}
	woke := make(chan wake, len(groups))
	var settled atomic.Bool
	defer settled.Store(true)
	for _, keys := range groups {
		go func() {
			key, err := s.blpop(ctx, timeout, keys...)
			switch {
			case errors.Is(err, goredis.Nil):
				err = errTimeout
			case err == nil && !settled.CompareAndSwap(false, true):
				s.giveBack(key)
				return
			}
			woke <- wake{key: key, err: err}
		}()
	}
	for range groups {
		w := <-woke
		if w.err == nil {
			return w.key, nil
		}
		if w.err != errTimeout {
			return "", w.err
		}
	}
	return "", nil
}

// giveBack leaves a wake-up token on list again (at most one): a token
// taken by a wait that had already returned.
func (s *Store) giveBack(list string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pipe := s.client.Pipeline()
	pipe.LPush(ctx, list, "1")
	pipe.LTrim(ctx, list, 0, 0)
	_, _ = pipe.Exec(ctx)
}

var errTimeout = errors.New("timeout")

// ExtendLeases renews the leases of ds, one script per queue, marking lost
// those Redis no longer grants.
func (s *Store) ExtendLeases(ctx context.Context, ds []*store.Delivery) error {
	byQueue := make(map[string][]*store.Delivery)
	for _, d := range ds {
		if d.Lease.Valid() { // a lease lost here is not renewed there either
			byQueue[d.Queue] = append(byQueue[d.Queue], d)
		}
	}
	var errs []error
	for q, group := range byQueue {
		qk := s.keys.queue(q)
		args := make([]interface{}, 0, 2+2*len(group))
		args = append(args, qk.task, s.opts.LeaseDuration.Milliseconds())
		for _, d := range group {
			args = append(args, d.Signature.UUID, d.Lease.Token())
		}
		start := time.Now()
		cmd := extendScript.Run(ctx, s.client, []string{qk.lease}, args...)
		err := cmd.Err()
		var lostIDs []string
		if err == nil {
			lostIDs, err = parseExtendReply(cmd.Val())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("extend leases in queue %s: %w", q, err))
			continue
		}
		lost := make(map[string]bool, len(lostIDs))
		for _, id := range lostIDs {
			lost[id] = true
		}
		for _, d := range group {
			if lost[d.Signature.UUID] {
				d.Lease.Lose()
			} else {
				d.Lease.Extend(start.Add(s.opts.LeaseDuration))
			}
		}
	}
	return errors.Join(errs...)
}

// settled finishes a settling call: the lease is released on success and
// marked lost when Redis refused it.
func settled(d *store.Delivery, err error) error {
	switch {
	case err == nil:
		d.Lease.Release()
	case errors.Is(err, store.ErrLeaseLost):
		d.Lease.Lose()
	}
	return err
}

// Ack forgets a task that is done, or keeps it for CompletedRetention, if
// the caller holds its lease. With take, it then takes the next task of
// d's queue for the caller in the same script, and returns it (nil when
// none is pending).
func (s *Store) Ack(ctx context.Context, d *store.Delivery, take *store.Take) (*store.Delivery, error) {
	qk := s.keys.queue(d.Queue)
	id := d.Signature.UUID
	keys := []string{qk.task + id, qk.lease, qk.completed}
	args := []interface{}{id, d.Lease.Token(), s.opts.CompletedRetention.Milliseconds()}
	t := s.newTaking(d.Queue, take)
	if t != nil {
		keys = append(keys, t.keys()...)
		args = append(args, t.args()...)
	}
	cmd, again := s.batch.RunSettle(ctx, id, ackScript, d.Lease.Valid, keys, args...)
	return t.settled(ctx, d, "ack", cmd, again)
}

// chordFlag is ack_success.lua's ARGV[13] for sig: "1" for a group
// member whose group has a chord callback.
func chordFlag(sig *tasks.Signature) string {
	if sig.GroupUUID != "" && sig.ChordCallback != nil {
		return "1"
	}
	return "0"
}

// settledUnlessDue is settled for a settle script's status code, but a
// chord member left unsettled (statusChordDue) keeps its lease: its
// caller settles it later.
func settledUnlessDue(d *store.Delivery, code int64) error {
	err := statusError(code, d.Signature.UUID)
	if code == statusChordDue {
		return err
	}
	return settled(d, err)
}

// taking is the take of a settle script (lib/queue.lua's take_tasks): the
// next task of the settled task's queue, for the slot it frees. A nil
// *taking takes nothing.
type taking struct {
	s     *Store
	q     string
	names *store.TaskNames
	token string    // the task's fencing token, its own base for release_fetch.lua
	start time.Time // when the settle began: the local lease counts from it
}

func (s *Store) newTaking(q string, take *store.Take) *taking {
	if take == nil {
		return nil
	}
	return &taking{s: s, q: q, names: take.Names, token: randomHex(12), start: time.Now()}
}

// keys are the take's keys: the queue's pending list, paused flag and
// notify list, then, with names, its rerouted set and the names' set.
func (t *taking) keys() []string {
	qk := t.s.keys.queue(t.q)
	keys := []string{qk.pending, qk.paused, qk.notify}
	if t.names != nil {
		keys = append(keys, qk.rerouted, qk.names+t.names.Key())
	}
	return keys
}

// args are the take's arguments: the task hash key prefix, the lease
// duration (ms) and the fencing token.
func (t *taking) args() []interface{} {
	return []interface{}{t.s.keys.queue(t.q).task, t.s.opts.LeaseDuration.Milliseconds(), t.token}
}

// settled reads cmd's reply, script's (ack or ack_success) run for d with
// t (sent again when again), settles d's lease as settled does and returns
// the task taken, if any. A task a run may have taken whose reply never
// reached the caller is put back (release_fetch.lua) rather than left to
// its lease's end.
func (t *taking) settled(ctx context.Context, d *store.Delivery, script string, cmd *goredis.Cmd, again bool) (*store.Delivery, error) {
	var (
		code  int64
		taken []dequeued
		took  bool
	)
	err := cmd.Err()
	if err == nil {
		code, taken, took, err = parseSettleTakeReply(script, cmd.Val())
		if err == nil && took && t == nil {
			err = malformed(script, nil, "a take's reply to a call that asked for none")
		}
	}
	if t != nil && !took && code != statusChordDue && (again || err != nil) {
		// A run whose reply never came back as a take (lost, cut off by
		// ctx, malformed, or answered by the run again) may have taken a
		// task nobody runs. A first run's own refusal took nothing.
		t.s.releaseFetch(ctx, t.q, t.token, t.start)
	}
	if err != nil {
		return nil, fmt.Errorf("acknowledge task %s: %w", d.Signature.UUID, err)
	}
	if err := settledUnlessDue(d, code); err != nil {
		return nil, err
	}
	if len(taken) == 0 {
		return nil, nil
	}
	return t.s.deliveries(t.q, taken, t.start)[0], nil
}

// AckSuccess writes state, the SUCCESS state of d's task (a group
// member's also in its group), publishes next, the tasks that follow it,
// with their PENDING states, and acknowledges the task: one script, only
// if the caller holds the lease, so a worker that lost its lease writes
// and sends nothing. A next task that its queue still holds counts as sent
// and is left alone, and after a recovery (d.Recovered > 0) so is one
// whose state shows it started or finished. A chord member whose success
// completes its group is written and committed but not acknowledged: the
// error wraps ErrChordDue, and the lease is kept. With take, it then
// takes the next task of d's queue for the caller and returns it. Only on
// a single server (OneNode), where one script may touch the state, group
// and other queues' keys.
func (s *Store) AckSuccess(ctx context.Context, d *store.Delivery, state *tasks.TaskState, next []*tasks.Signature, take *store.Take) (*store.Delivery, error) {
	sig := d.Signature
	id := sig.UUID
	if !s.oneNode {
		return nil, fmt.Errorf("acknowledge task %s with its result: the state key is on another node", id)
	}
	w, err := encodeState(state)
	if err != nil {
		return nil, fmt.Errorf("set state success of task %s: %w", id, err)
	}
	qk := s.keys.queue(d.Queue)
	keys := []string{qk.task + id, qk.lease, qk.completed, s.keys.state(id)}
	var member string
	if sig.GroupUUID != "" {
		if err := validGroup(sig.GroupUUID); err != nil {
			return nil, fmt.Errorf("set state success of task %s: %w", id, err)
		}
		raw, err := json.Marshal(state)
		if err != nil {
			return nil, fmt.Errorf("set state success of task %s: %w", id, err)
		}
		member = string(raw)
		keys = append(keys, s.keys.group(sig.GroupUUID).all()...)
	}
	recovered := "0"
	if d.Recovered > 0 {
		recovered = "1"
	}
	fields := w.fields()
	args := make([]interface{}, 0, 12+len(fields)+len(next)*4)
	args = append(args, id, d.Lease.Token(), s.opts.CompletedRetention.Milliseconds(), s.opts.ResultsExpireIn.Milliseconds(),
		member, formatTime(state.CreatedAt), sig.GroupTaskCount, s.opts.ResultsExpireIn.Milliseconds(), s.groupTTL().Milliseconds(),
		recovered, 0, chordFlag(sig), len(fields))
	args = append(args, fields...)
	for _, n := range next {
		if err := checkSig(n); err != nil {
			return nil, fmt.Errorf("send the tasks after task %s: %w", id, err)
		}
		msg, err := s.message(n)
		if err != nil {
			return nil, fmt.Errorf("send the tasks after task %s: %w", id, err)
		}
		queue, err := s.route(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("send task %s after task %s: %w", n.UUID, id, err)
		}
		n.RoutingKey = queue
		if err := s.registerQueue(ctx, n.RoutingKey); err != nil {
			return nil, err
		}
		q := &enqueueArgs{queue: s.keys.queue(n.RoutingKey), keyed: true}
		if err := s.addEncoded(q, n, msg); err != nil {
			return nil, fmt.Errorf("send task %s after task %s: %w", n.UUID, id, err)
		}
		nk := q.queue
		keys = append(keys, nk.pending, nk.scheduled, nk.archived, nk.notify, nk.task+n.UUID, q.stateKeys[0])
		args = append(args, q.tasks...)
	}
	t := s.newTaking(d.Queue, take)
	if t != nil {
		tk := t.keys()
		args[10] = len(tk) // ARGV[12]: RunSettle puts ARGV[1] before args
		keys = append(keys, tk...)
		args = append(args, t.args()...)
	}
	cmd, again := s.batch.RunSettle(ctx, id, ackSuccessScript, d.Lease.Valid, keys, args...)
	return t.settled(ctx, d, "ack_success", cmd, again)
}

// Commit records outcome, the final state of d's task, in the task, only
// while the caller holds d's lease (else an error wrapping ErrLeaseLost,
// and nothing is written). A worker that takes the task after this finds
// the outcome in its delivery and finishes it instead of running it.
func (s *Store) Commit(ctx context.Context, d *store.Delivery, outcome *tasks.TaskState) error {
	_, err := s.commit(ctx, d, outcome, true, false)
	return err
}

// WriteState writes state, a state of d's task, only while the caller holds
// d's lease; with record, it is also recorded as the task's outcome (see
// Commit). A final state of a group member is recorded in its group, and
// how many members have finished is returned. On a single server only
// (OneNode), where the state and group keys may be touched by the queue's
// script.
func (s *Store) WriteState(ctx context.Context, d *store.Delivery, state *tasks.TaskState, record bool) (int64, error) {
	if !s.oneNode {
		return 0, fmt.Errorf("set state %s of task %s under its lease: the state key is on another node", strings.ToLower(state.State), d.Signature.UUID)
	}
	return s.commit(ctx, d, state, record, true)
}

// commit runs commit.lua for d: the outcome recorded (with record), and the
// state written (with write), a group member's final state recorded in its
// group.
func (s *Store) commit(ctx context.Context, d *store.Delivery, state *tasks.TaskState, record, write bool) (int64, error) {
	sig := d.Signature
	id := sig.UUID
	op := "commit " + strings.ToLower(state.State)
	w, err := encodeState(state)
	if err != nil {
		return 0, fmt.Errorf("%s of task %s: %w", op, id, err)
	}
	member := write && sig.GroupUUID != "" && state.IsCompleted()
	var outcome string
	if record || member {
		raw, err := json.Marshal(state)
		if err != nil {
			return 0, fmt.Errorf("%s of task %s: encode state: %w", op, id, err)
		}
		outcome = string(raw)
	}
	qk := s.keys.queue(d.Queue)
	keys := []string{qk.task + id}
	args := []interface{}{id, d.Lease.Token(), outcome, s.opts.ResultsExpireIn.Milliseconds(), formatTime(state.CreatedAt),
		sig.GroupTaskCount, s.opts.ResultsExpireIn.Milliseconds(), s.groupTTL().Milliseconds()}
	if write {
		keys = append(keys, s.keys.state(id))
		args = append(args, w.fields()...)
	}
	if member {
		if err := validGroup(sig.GroupUUID); err != nil {
			return 0, fmt.Errorf("%s of task %s: %w", op, id, err)
		}
		keys = append(keys, s.keys.group(sig.GroupUUID).all()...)
	}
	cmd := s.batch.RunScript(ctx, id, commitScript, keys, args...)
	err = cmd.Err()
	var code, finished int64
	if err == nil {
		code, finished, err = parseCommitReply(cmd.Val())
	}
	if err != nil {
		return 0, fmt.Errorf("%s of task %s: %w", op, id, err)
	}
	if err := statusError(code, id); err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			d.Lease.Lose()
		}
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return finished, nil
}

// Retry schedules d's task to run again at at, storing its signature as it
// is now and errMsg as its last error, if the caller holds its lease.
func (s *Store) Retry(ctx context.Context, d *store.Delivery, at time.Time, errMsg string) error {
	qk := s.keys.queue(d.Queue)
	id := d.Signature.UUID
	msg, err := storedMessage(d.Signature)
	if err != nil {
		return fmt.Errorf("retry task %s: %w", id, err)
	}
	err = s.runSettle(ctx, retryScript, id, d.Lease.Valid, []string{qk.task + id, qk.lease, qk.retry, qk.pending, qk.notify},
		id, d.Lease.Token(), msg, msOf(at), errMsg)
	return settled(d, err)
}

// Archive keeps d's task as a dead letter with reason, if the caller holds
// its lease.
func (s *Store) Archive(ctx context.Context, d *store.Delivery, reason string) error {
	qk := s.keys.queue(d.Queue)
	id := d.Signature.UUID
	err := s.runSettle(ctx, archiveScript, id, d.Lease.Valid, []string{qk.task + id, qk.lease, qk.archived},
		id, d.Lease.Token(), reason, s.opts.ArchiveMaxAge.Milliseconds(), s.opts.ArchiveMaxSize, qk.task)
	return settled(d, err)
}

// Requeue puts unfinished tasks back at the head of their queues, those
// whose lease the caller holds; the others are reported with ErrLeaseLost.
func (s *Store) Requeue(ctx context.Context, ds []*store.Delivery) error {
	byQueue := make(map[string][]*store.Delivery)
	var order []string
	for _, d := range ds {
		if _, ok := byQueue[d.Queue]; !ok {
			order = append(order, d.Queue)
		}
		byQueue[d.Queue] = append(byQueue[d.Queue], d)
	}
	var errs []error
	for _, q := range order {
		group := byQueue[q]
		qk := s.keys.queue(q)
		args := make([]interface{}, 0, 1+2*len(group))
		args = append(args, qk.task)
		for _, d := range group {
			args = append(args, d.Signature.UUID, d.Lease.Token())
		}
		holds := func() bool {
			return slices.ContainsFunc(group, func(d *store.Delivery) bool { return d.Lease.Valid() })
		}
		cmd, _ := s.batch.RunSettle(ctx, group[0].Signature.UUID, requeueScript, holds, []string{qk.pending, qk.lease, qk.notify}, args...)
		err := cmd.Err()
		var lostIDs []string
		if err == nil {
			lostIDs, err = parseRequeueReply(cmd.Val())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("requeue to queue %s: %w", q, err))
			continue
		}
		lost := make(map[string]bool, len(lostIDs))
		for _, id := range lostIDs {
			lost[id] = true
		}
		for _, d := range group {
			if lost[d.Signature.UUID] {
				d.Lease.Lose()
				errs = append(errs, fmt.Errorf("requeue task %s: %w", d.Signature.UUID, store.ErrLeaseLost))
			} else {
				d.Lease.Release()
			}
		}
	}
	return errors.Join(errs...)
}

// ClaimLease takes the claim name for lease unless another lease on it runs
// or it is done, and keeps its key for keep (see store.Claimer and
// lua/claim_lease.lua). The call's token lets a run sent again after a lost
// reply recognise the first run's lease as its own.
func (s *Store) ClaimLease(ctx context.Context, name string, lease, keep time.Duration) (store.ClaimResult, error) {
	if lease < time.Millisecond {
		return store.ClaimResult{}, fmt.Errorf("claim %s: lease %v is shorter than 1ms", name, lease)
	}
	key, token := s.keys.claim(name), randomHex(12)
	args := []interface{}{token, lease.Milliseconds(), max(keep, lease).Milliseconds()}
	var cmd *goredis.Cmd
	err := transport.Again(ctx, func() error {
		cmd = s.repl.Eval(ctx, s.client, false, claimLeaseScript, []string{key}, args)
		return cmd.Err()
	}, transport.Retry{})
	var res store.ClaimResult
	if err == nil {
		res, err = parseClaimLeaseReply(cmd.Val())
	}
	if err != nil {
		return store.ClaimResult{}, fmt.Errorf("claim %s: %w", name, err)
	}
	if res.Status == store.ClaimWon {
		res.Token = token
	}
	return res, nil
}

// Status codes of claim_lease.
const (
	claimWon       = 0
	claimTakenOver = 1
	claimHeld      = 2
	claimDone      = 3
)

// parseClaimLeaseReply decodes claim_lease's {status, ms}.
func parseClaimLeaseReply(v interface{}) (store.ClaimResult, error) {
	const script = "claim_lease"
	arr, err := asArray(script, v)
	if err != nil {
		return store.ClaimResult{}, err
	}
	if len(arr) != 2 {
		return store.ClaimResult{}, malformed(script, nil, "%s, want 2 elements", describe(v))
	}
	code, err := asInt(script, elem(0, "status"), arr[0])
	if err != nil {
		return store.ClaimResult{}, err
	}
	ms, err := asInt(script, elem(1, "ms"), arr[1])
	if err != nil {
		return store.ClaimResult{}, err
	}
	switch code {
	case claimWon, claimTakenOver:
		return store.ClaimResult{Status: store.ClaimWon, TakenOver: code == claimTakenOver}, nil
	case claimHeld:
		if ms <= 0 {
			return store.ClaimResult{}, malformed(script, nil, "held for %d ms, want a positive time", ms)
		}
		return store.ClaimResult{Status: store.ClaimHeld, Remaining: time.Duration(ms) * time.Millisecond}, nil
	case claimDone:
		return store.ClaimResult{Status: store.ClaimDone}, nil
	default:
		return store.ClaimResult{}, malformed(script, nil, "status %d, want 0 to 3", code)
	}
}

// CompleteClaim marks the claim name done for the holder of token (see
// store.Claimer and lua/complete_claim.lua); safe to send again.
func (s *Store) CompleteClaim(ctx context.Context, name, token string) error {
	var cmd *goredis.Cmd
	err := transport.Again(ctx, func() error {
		cmd = s.repl.Eval(ctx, s.client, false, completeClaimScript, []string{s.keys.claim(name)}, []interface{}{token})
		return cmd.Err()
	}, transport.Retry{})
	var code int64
	if err == nil {
		code, err = parseStatusReply("complete_claim", cmd.Val(), 0, 1)
	}
	if err != nil {
		return fmt.Errorf("complete claim %s: %w", name, err)
	}
	if code == 1 {
		return fmt.Errorf("complete claim %s: %w", name, store.ErrLeaseLost)
	}
	return nil
}

// Holds reports, for each of sigs, whether its queue (RoutingKey; any
// shard of a sharded queue) holds a task with its UUID, as enqueue's duplicate check (lib/queue.lua's held) sees it: a
// task hash that is not archived. One round trip (on Cluster, one per
// node).
func (s *Store) Holds(ctx context.Context, sigs []*tasks.Signature) ([]bool, error) {
	if len(sigs) == 0 {
		return nil, nil
	}
	queues := make([][]string, len(sigs))
	for i, sig := range sigs {
		if sig == nil {
			return nil, fmt.Errorf("holds: task %d: %w", i, tasks.ErrNilSignature)
		}
		// Every shard: the one a send now would choose may not be the one
		// an earlier send chose, if the shards grew in between.
		names, err := s.Shards(ctx, sig.RoutingKey)
		if err != nil {
			return nil, fmt.Errorf("holds: task %s: %w", sig.UUID, err)
		}
		queues[i] = names
	}
	cmds := make([][]*goredis.StringCmd, len(sigs))
	err := transport.Again(ctx, func() error {
		_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, sig := range sigs {
				cmds[i] = make([]*goredis.StringCmd, len(queues[i]))
				for j, q := range queues[i] {
					cmds[i][j] = p.HGet(ctx, s.keys.queue(q).task+sig.UUID, "state")
				}
			}
			return nil
		})
		if errors.Is(err, goredis.Nil) {
			return nil // a task hash that is missing: reported per command
		}
		return err
	}, transport.Retry{})
	if err != nil {
		return nil, fmt.Errorf("holds: %w", err)
	}
	out := make([]bool, len(sigs))
	for i, shards := range cmds {
		for _, cmd := range shards {
			state, err := cmd.Result()
			switch {
			case errors.Is(err, goredis.Nil):
			case err != nil:
				return nil, fmt.Errorf("holds: task %s: %w", sigs[i].UUID, err)
			default:
				out[i] = out[i] || state != "archived" && state != "cancelled"
			}
		}
	}
	return out, nil
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
