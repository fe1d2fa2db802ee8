package rdb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Aggregation (store.Aggregator; the keys in keys.go, the shared Lua in
// lua/lib/aggregate.lua). A member, a task published with an
// AggregationKey, is held in its queue's group of its name and key: a zset
// of member ids by join stamp. Each task name has a due index, a zset of
// its groups' keys by a time no later than each is due (a group due by
// size only and not full is absent): a member that joins now files its
// group only when it is the first or fills it, and claim_batch.lua files a
// group it finds early at its true time (lib/aggregate.lua). Publish
// (enqueue.lua) adds a member at once, or, with an ETA, the forwarder does
// when it is due (forward.lua). The queue's elected maintainer wakes the
// workers of a name when one of its groups or batches is due (forward.lua);
// a member that fills a group wakes them itself. A worker claims a batch
// (claim_batch.lua): the oldest members of the earliest due group of its
// names move into a batch hash under a lease, listed in the name's batches
// zset by lease end; a batch whose lease ends, or whose retry comes, is
// taken again whole by the next claim. Completing, retrying and archiving
// a batch are settle scripts fenced by the batch's lease (lib/fence.lua's
// check_settle on the batch hash).
//
// Cost of a member: no round trip of its own (it travels in its publish's
// enqueue script, which concurrent publishes share: combine.go), O(log G)
// in a group of G; eight commands in Redis for a member due now whose
// UUID its sender made (EVALSHA, TIME, the policy's HGET, the newest
// stamp's ZRANGE, ZADD, the task hash's HSET, INCRBY of the count, ZCARD),
// the group filed (ZADD of its due time) only when it is new or full. A
// claim is one script per queue tried,
// O(N log B) for N names, plus O(M log G) for the M members it takes.

// statusNoAggregator is enqueue.lua's answer for a member whose name no
// worker alive aggregates on its queue.
const statusNoAggregator = 4

// memberGroup returns the aggregation group of sig for enqueue.lua:
// "<name>\n<key>", or "" when sig is no member.
func memberGroup(sig *tasks.Signature) (string, error) {
	if sig.AggregationKey == "" {
		return "", nil
	}
	if err := validAggregationName(sig.Name); err != nil {
		return "", err
	}
	return aggGroupID(sig.Name, sig.AggregationKey), nil
}

// validAggregationName reports why name cannot name the task of
// aggregation groups, or nil.
func validAggregationName(name string) error {
	if name == "" || strings.Contains(name, "\n") {
		return fmt.Errorf("aggregation: task name %q: it must be set and hold no newline", name)
	}
	return nil
}

// AnnounceAggregators records that a worker alive aggregates each task
// name of policies on queues, with its policy, for ttl
// (announce_aggregators.lua): one script per queue.
func (s *Store) AnnounceAggregators(ctx context.Context, queues []string, policies map[string]store.AggregationPolicy, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("announce aggregators: ttl %v is shorter than 1ms", ttl)
	}
	if len(policies) == 0 {
		return nil
	}
	names := make([]string, 0, len(policies))
	for name, p := range policies {
		if err := validAggregationName(name); err != nil {
			return fmt.Errorf("announce aggregators: %w", err)
		}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("announce aggregator of %s: %w", name, err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, q := range queues {
		if err := ValidQueue(q); err != nil {
			return fmt.Errorf("announce aggregators: %w", err)
		}
		qk := s.keys.queue(q)
		args := make([]interface{}, 0, 2+2*len(names))
		args = append(args, qk.agg, ttl.Milliseconds())
		for _, name := range names {
			p := policies[name]
			args = append(args, name, fmt.Sprintf("%d %d %d", p.MaxSize, ceilMs(p.MaxDelay), ceilMs(p.GracePeriod)))
		}
		err := transport.Again(ctx, func() error {
			return s.repl.Eval(ctx, s.client, false, announceAggregatorsScript, []string{qk.aggPolicies, qk.aggGroups}, args).Err()
		}, transport.Retry{})
		if err != nil {
			errs = append(errs, fmt.Errorf("announce the aggregators of queue %s: %w", q, err))
		}
	}
	return errors.Join(errs...)
}

// parsePolicy parses a policy as announce_aggregators.lua keeps it,
// "<till ms> <max size> <max delay ms> <grace period ms>".
func parsePolicy(v string) (store.AggregationPolicy, bool) {
	var till, size, delay, grace int64
	if n, err := fmt.Sscanf(v, "%d %d %d %d", &till, &size, &delay, &grace); n != 4 || err != nil {
		return store.AggregationPolicy{}, false
	}
	return store.AggregationPolicy{MaxSize: int(size), MaxDelay: time.Duration(delay) * time.Millisecond,
		GracePeriod: time.Duration(grace) * time.Millisecond}, true
}

// ceilMs is d in whole milliseconds, rounded up, so that a limit shorter
// than 1ms still applies.
func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// ClaimBatch takes one batch of queues, tried in order, whose task name is
// in names, under a lease (claim_batch.lua), or returns nil when none is
// due. A claim whose reply was lost is not sent again: its batch comes
// back when the lease ends.
func (s *Store) ClaimBatch(ctx context.Context, queues []string, names *store.TaskNames) (*store.Batch, error) {
	if names == nil || len(names.List()) == 0 {
		return nil, nil
	}
	for _, q := range queues {
		if err := ValidQueue(q); err != nil {
			return nil, fmt.Errorf("claim a batch: %w", err)
		}
	}
	lease := s.opts.LeaseDuration
	for _, q := range queues {
		qk := s.keys.queue(q)
		args := make([]interface{}, 0, 5+len(names.List()))
		args = append(args, qk.agg, qk.task, lease.Milliseconds(), randomHex(12), randomHex(12))
		for _, n := range names.List() {
			args = append(args, n)
		}
		start := time.Now()
		cmd := s.repl.Eval(ctx, s.client, true, claimBatchScript, []string{qk.aggPolicies, qk.aggGroups, qk.paused}, args)
		err := cmd.Err()
		var c *claimedBatch
		if err == nil {
			c, err = parseClaimBatchReply(cmd.Val())
		}
		if err != nil {
			return nil, fmt.Errorf("claim a batch of queue %s: %w", q, err)
		}
		if c == nil {
			continue
		}
		b := &store.Batch{
			ID:        c.id,
			Queue:     q,
			Name:      c.name,
			Key:       c.key,
			Lease:     store.NewLease(c.token, start.Add(lease)),
			Failed:    c.failed,
			Recovered: c.recovered,
		}
		if c.handed != "" {
			if b.Aggregate, err = tasks.DecodeSignature([]byte(c.handed)); err != nil {
				// Its lease runs out and it is taken again: it is not
				// built anew, since the aggregate may be published.
				return nil, fmt.Errorf("claim a batch of queue %s: batch %s was handed over with an aggregate that cannot be read: %w", q, c.id, err)
			}
		}
		for _, m := range c.members {
			sig, err := decodeStored(m.msg, m.id, q)
			if err != nil {
				// The batch is the aggregator's to judge: the member is
				// kept, as much of it as is known.
				sig = &tasks.Signature{Name: c.name}
			}
			sig.UUID, sig.RoutingKey, sig.AggregationKey = m.id, q, c.key
			b.Members = append(b.Members, sig)
		}
		return b, nil
	}
	return nil, nil
}

// NextDue returns when the next group or batch of queues whose task name
// is in names becomes due, or earlier (the due index holds a group by a
// time no later than its due time: lib/aggregate.lua), or the zero time
// when none waits: one pipeline. No worker calls it (the maintainer's
// forward.lua watches the due times); it answers inspection and tests.
func (s *Store) NextDue(ctx context.Context, queues []string, names *store.TaskNames) (time.Time, error) {
	if names == nil || len(names.List()) == 0 {
		return time.Time{}, nil
	}
	pipe := s.client.Pipeline()
	type firstsOf struct {
		paused *goredis.IntCmd
		firsts []*goredis.ZSliceCmd
	}
	var all []firstsOf
	for _, q := range queues {
		if err := ValidQueue(q); err != nil {
			return time.Time{}, fmt.Errorf("next due batch: %w", err)
		}
		qk := s.keys.queue(q)
		f := firstsOf{paused: pipe.Exists(ctx, qk.paused)}
		for _, n := range names.List() {
			f.firsts = append(f.firsts, pipe.ZRangeWithScores(ctx, qk.aggDue(n), 0, 0), pipe.ZRangeWithScores(ctx, qk.aggBatches(n), 0, 0))
		}
		all = append(all, f)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return time.Time{}, fmt.Errorf("next due batch of %v: %w", queues, err)
	}
	var next time.Time
	for _, f := range all {
		if f.paused.Val() == 1 {
			continue // a paused queue's batches wait
		}
		for _, cmd := range f.firsts {
			zs := cmd.Val()
			if len(zs) == 0 {
				continue
			}
			if t := time.UnixMilli(int64(zs[0].Score)); next.IsZero() || t.Before(next) {
				next = t
			}
		}
	}
	return next, nil
}

// WaitDue waits for a wake-up token on the aggregation notify list of one
// of names on queues (left when a group or batch of the name is due: see
// lib/aggregate.lua), or for at most limit. On Redis Cluster it waits on
// each queue's lists in parallel (blpopAny).
func (s *Store) WaitDue(ctx context.Context, queues []string, names *store.TaskNames, limit time.Duration) error {
	if len(queues) == 0 {
		return fmt.Errorf("wait for a due batch: %w", store.ErrNoQueue)
	}
	var groups [][]string // by queue: one slot each
	for _, q := range queues {
		if err := ValidQueue(q); err != nil {
			return fmt.Errorf("wait for a due batch: %w", err)
		}
		if names == nil || len(names.List()) == 0 {
			continue
		}
		qk := s.keys.queue(q)
		var keys []string
		for _, name := range names.List() {
			keys = append(keys, qk.aggNotify(name))
		}
		groups = append(groups, keys)
	}
	if len(groups) == 0 { // no names: nothing can wake it
		t := time.NewTimer(limit)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// One BLPOP blocks for less than the client's read timeout: wait in
	// several until limit has passed.
	deadline := time.Now().Add(limit)
	for {
		// At least 10 ms: a timeout that rounds to 0 would block forever.
		key, err := s.blpopAny(ctx, max(min(time.Until(deadline), s.blockTimeout(ctx)), 10*time.Millisecond), groups)
		switch {
		case err == nil && key != "":
			return nil
		case err == nil:
			if !time.Now().Before(deadline) {
				return nil
			}
		case transport.Expired(ctx) != nil: // perhaps what cut the read
			return transport.Expired(ctx)
		default:
			return fmt.Errorf("wait for a due batch: %w", err)
		}
	}
}

// CompleteBatch publishes aggregate and forgets b's members, in one step,
// only while the caller holds b's lease (complete_batch.lua). On Redis
// Cluster an aggregate bound for another queue, in another slot, is
// handed over instead (handOver).
func (s *Store) CompleteBatch(ctx context.Context, b *store.Batch, aggregate *tasks.Signature) error {
	what := "complete batch " + b.ID
	if err := checkSig(aggregate); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if aggregate.AggregationKey != "" {
		return fmt.Errorf("%s: aggregate %s has AggregationKey %q: an aggregate is no member", what, aggregate.UUID, aggregate.AggregationKey)
	}
	queue, err := s.route(ctx, aggregate)
	if err != nil {
		return fmt.Errorf("%s: aggregate %s: %w", what, aggregate.UUID, err)
	}
	aggregate.RoutingKey = queue
	if b.Aggregate != nil && (b.Aggregate.UUID != aggregate.UUID || b.Aggregate.RoutingKey != aggregate.RoutingKey) {
		return fmt.Errorf("%s: aggregate %s to queue %s, but the batch was handed over with aggregate %s to queue %s",
			what, aggregate.UUID, aggregate.RoutingKey, b.Aggregate.UUID, b.Aggregate.RoutingKey)
	}
	msg, err := tasks.EncodeSignature(aggregate)
	if err != nil {
		return fmt.Errorf("%s: aggregate %s: %w", what, aggregate.UUID, err)
	}
	var eta int64
	if aggregate.ETA != nil {
		eta = msOf(*aggregate.ETA)
	}
	if err := s.registerQueue(ctx, aggregate.RoutingKey); err != nil {
		return err
	}
	qk, ak := s.keys.queue(b.Queue), s.keys.queue(aggregate.RoutingKey)
	limit, err := limitItem(ak, aggregate.Limit)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	band, err := bandItem(aggregate)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if aggregate.RoutingKey != b.Queue && !s.oneNode {
		return s.handOver(ctx, b, aggregate, msg, eta, limit, band)
	}
	keys := []string{qk.aggBatch(b.ID), qk.aggBatches(b.Name), qk.aggCount, ak.task + aggregate.UUID,
		ak.pending, ak.scheduled, ak.archived, ak.notify}
	code, err := s.settleBatch(ctx, "complete_batch", completeBatchScript, completeCodes, b, keys, b.ID, b.Lease.Token(), qk.task, aggregate.UUID, msg, eta, limit, band)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case code == statusDuplicate:
		return fmt.Errorf("%s: %w", what, statusError(code, aggregate.UUID))
	}
	return batchSettled(b, what, code)
}

// ExtendBatch renews b's lease for a LeaseDuration, only while the caller
// holds it (extend_batch.lua); otherwise it marks the lease lost and
// returns ErrLeaseLost. The new expiry is reckoned from before the call,
// as ExtendLeases reckons a task's.
func (s *Store) ExtendBatch(ctx context.Context, b *store.Batch) error {
	what := "extend batch " + b.ID
	if err := ValidQueue(b.Queue); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !b.Lease.Valid() { // a lease lost here is not renewed there either
		return fmt.Errorf("%s: %w", what, store.ErrLeaseLost)
	}
	qk := s.keys.queue(b.Queue)
	start := time.Now()
	cmd := extendBatchScript.Run(ctx, s.client, []string{qk.aggBatch(b.ID), qk.aggBatches(b.Name)},
		b.ID, b.Lease.Token(), s.opts.LeaseDuration.Milliseconds())
	if err := cmd.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	code, err := parseStatusReply("extend_batch", cmd.Val(), batchCodes...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if code == statusLeaseLost || !b.Lease.Extend(start.Add(s.opts.LeaseDuration)) {
		b.Lease.Lose()
		return fmt.Errorf("%s: %w", what, store.ErrLeaseLost)
	}
	return nil
}

// handedForgottenLife is the life, in leases, of the marker that a
// handed-over aggregate was published (publish_handed.lua) once its batch
// is forgotten: a publish still on its way, sent while its worker held the
// lease, finds it.
const handedForgottenLife = 10

// handOver completes b on Redis Cluster when its aggregate goes to another
// queue, in another slot, where one script cannot reach: in four steps,
// each safe to repeat, so that a worker that dies between any two loses no
// member and publishes the aggregate once.
//
//  1. hand_batch.lua, in the batch's slot, under b's lease: the batch
//     records the aggregate (the first one recorded stays) and is no
//     longer retried, archived or stranded; taken again, it comes with
//     Batch.Aggregate, to be finished rather than built anew. Run by every
//     finisher, it fences the steps after it: a forgotten batch, or a lost
//     lease, refuses it.
//  2. publish_handed.lua, in the aggregate's slot, sent (and sent again)
//     only while b's lease is held: the aggregate is published with a
//     marker that makes every later run a no-op.
//  3. forget_batch.lua, in the batch's slot: the batch and its members
//     are forgotten.
//  4. The marker, so far without expiry, is given handedForgottenLife
//     leases. Should this fail (the worker died just before), the marker
//     stays: one small key.
func (s *Store) handOver(ctx context.Context, b *store.Batch, aggregate *tasks.Signature, msg []byte, eta int64, limit, band string) error {
	what := "complete batch " + b.ID
	qk, ak := s.keys.queue(b.Queue), s.keys.queue(aggregate.RoutingKey)
	code, err := s.settleBatch(ctx, "hand_batch", handBatchScript, batchCodes, b, []string{qk.aggBatch(b.ID)}, b.Lease.Token(), msg)
	switch {
	case err != nil:
		return fmt.Errorf("%s: hand over aggregate %s: %w", what, aggregate.UUID, err)
	case code == statusLeaseLost:
		b.Lease.Lose()
		return fmt.Errorf("%s: %w", what, store.ErrLeaseLost)
	}
	if b.Aggregate == nil {
		b.Aggregate = aggregate
	}
	if err := s.stepped(1); err != nil {
		return err
	}
	if !b.Lease.Valid() {
		return fmt.Errorf("%s: handed over; whoever takes it next publishes aggregate %s: %w", what, aggregate.UUID, store.ErrLeaseLost)
	}
	sent := ak.aggSent(aggregate.UUID)
	code, err = s.evalStatus(ctx, "publish_handed", publishHandedScript,
		[]string{sent, ak.task + aggregate.UUID, ak.pending, ak.scheduled, ak.archived, ak.notify},
		[]interface{}{aggregate.UUID, msg, eta, limit, b.Lease.Token(), band}, transport.Retry{While: b.Lease.Valid}, statusOK, statusDuplicate)
	switch {
	case err != nil:
		return fmt.Errorf("%s: publish aggregate %s handed over: %w", what, aggregate.UUID, err)
	case code == statusDuplicate:
		return fmt.Errorf("%s: %w", what, statusError(code, aggregate.UUID))
	}
	if err := s.stepped(2); err != nil {
		return err
	}
	code, err = s.evalStatus(ctx, "forget_batch", forgetBatchScript,
		[]string{qk.aggBatch(b.ID), qk.aggBatches(b.Name), qk.aggCount}, []interface{}{b.ID, qk.task}, transport.Retry{}, statusOK, statusLeaseLost)
	switch {
	case err != nil:
		return fmt.Errorf("%s: forget the batch, its aggregate %s published: %w", what, aggregate.UUID, err)
	case code != statusOK:
		return fmt.Errorf("%s: forget the batch: it was not handed over", what)
	}
	if err := s.stepped(3); err != nil {
		return err
	}
	_ = s.client.PExpire(ctx, sent, handedForgottenLife*s.opts.LeaseDuration).Err() // else it stays
	b.Lease.Release()
	return nil
}

// evalStatus runs script (name.lua), which is safe to run again, until it
// answers or fails in a way another run would not mend, or r says to stop
// (transport/retry.go), and returns its status code, one of codes.
func (s *Store) evalStatus(ctx context.Context, name string, script *goredis.Script, keys []string, args []interface{}, r transport.Retry, codes ...int64) (int64, error) {
	var code int64
	err := transport.Again(ctx, func() error {
		cmd := s.repl.Eval(ctx, s.client, true, script, keys, args)
		if err := cmd.Err(); err != nil {
			return err
		}
		var perr error
		code, perr = parseStatusReply(name, cmd.Val(), codes...)
		return perr
	}, r)
	return code, err
}

// stepped calls the test hook handOverStep, if set, after step.
func (s *Store) stepped(step int) error {
	if s.handOverStep == nil {
		return nil
	}
	return s.handOverStep(step)
}

// RetryBatch gives b back, whole, to be taken again from at, only while
// the caller holds b's lease (retry_batch.lua).
func (s *Store) RetryBatch(ctx context.Context, b *store.Batch, at time.Time, errMsg string) error {
	what := "retry batch " + b.ID
	qk := s.keys.queue(b.Queue)
	code, err := s.settleBatch(ctx, "retry_batch", retryBatchScript, batchCodes, b, []string{qk.aggBatch(b.ID), qk.aggBatches(b.Name)},
		b.ID, b.Lease.Token(), msOf(at), errMsg)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return batchSettled(b, what, code)
}

// ArchiveBatch keeps b's members as dead letters of b's queue with reason,
// only while the caller holds b's lease (archive_batch.lua).
func (s *Store) ArchiveBatch(ctx context.Context, b *store.Batch, reason string) error {
	what := "archive batch " + b.ID
	qk := s.keys.queue(b.Queue)
	code, err := s.settleBatch(ctx, "archive_batch", archiveBatchScript, batchCodes, b, []string{qk.aggBatch(b.ID), qk.aggBatches(b.Name), qk.aggCount, qk.archived},
		b.ID, b.Lease.Token(), reason, s.opts.ArchiveMaxAge.Milliseconds(), s.opts.ArchiveMaxSize, qk.task)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return batchSettled(b, what, code)
}

// settleBatch runs script (name.lua), a settle script of batch b, through
// evalSettle while b's lease is held, and returns its status code, one of
// codes.
func (s *Store) settleBatch(ctx context.Context, name string, script *goredis.Script, codes []int64, b *store.Batch, keys []string, args ...interface{}) (int64, error) {
	if err := ValidQueue(b.Queue); err != nil {
		return 0, err
	}
	cmd, err := s.evalSettle(ctx, script, b.Lease.Valid, keys, args)
	if err != nil {
		return 0, err
	}
	return parseStatusReply(name, cmd.Val(), codes...)
}

// batchCodes are the status codes of the batch settle scripts; the
// aggregate's publish (complete_batch) may also find it a duplicate.
var (
	batchCodes    = []int64{statusOK, statusLeaseLost}
	completeCodes = []int64{statusOK, statusLeaseLost, statusDuplicate}
)

// batchSettled finishes a settle of b with status code: its lease is
// released on success and marked lost when Redis refused it.
func batchSettled(b *store.Batch, what string, code int64) error {
	switch code {
	case statusOK:
		b.Lease.Release()
		return nil
	case statusLeaseLost:
		b.Lease.Lose()
		return fmt.Errorf("%s: %w", what, store.ErrLeaseLost)
	}
	return fmt.Errorf("%s: unexpected script status %d", what, code)
}

// Aggregations lists queue's groups with waiting members, by name then
// key: three round trips (the groups, the policies, then one pipeline
// reading each group).
func (s *Store) Aggregations(ctx context.Context, queue string) ([]*store.AggregationInfo, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	qk := s.keys.queue(queue)
	groups, err := s.client.SMembers(ctx, qk.aggGroups).Result()
	if err != nil {
		return nil, fmt.Errorf("list the aggregation groups of %s: %w", queue, err)
	}
	if len(groups) == 0 {
		return nil, nil
	}
	rules, err := s.client.HGetAll(ctx, qk.aggPolicies).Result()
	if err != nil {
		return nil, fmt.Errorf("read the aggregation policies of %s: %w", queue, err)
	}
	type read struct {
		info                 *store.AggregationInfo
		policy               store.AggregationPolicy
		size                 *goredis.IntCmd
		oldest, newest, full *goredis.ZSliceCmd
	}
	reads := make([]read, 0, len(groups))
	pipe := s.client.Pipeline()
	for _, g := range groups {
		name, key, ok := strings.Cut(g, "\n")
		if !ok {
			continue
		}
		members := qk.aggGroup(name, key)
		r := read{
			info:   &store.AggregationInfo{Queue: queue, Name: name, Key: key},
			size:   pipe.ZCard(ctx, members),
			oldest: pipe.ZRangeWithScores(ctx, members, 0, 0),
			newest: pipe.ZRangeWithScores(ctx, members, -1, -1),
		}
		// A group without a policy (its announcement long gone) is never due.
		if p, ok := parsePolicy(rules[name]); ok {
			r.policy = p
			if p.MaxSize > 0 {
				r.full = pipe.ZRangeWithScores(ctx, members, int64(p.MaxSize-1), int64(p.MaxSize-1))
			}
		}
		reads = append(reads, r)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("read the aggregation groups of %s: %w", queue, err)
	}
	var out []*store.AggregationInfo
	for _, r := range reads {
		oldest, newest := r.oldest.Val(), r.newest.Val()
		if r.size.Val() == 0 || len(oldest) == 0 || len(newest) == 0 {
			continue // emptied between the reads
		}
		r.info.Size = clampInt(r.size.Val())
		r.info.Oldest, r.info.Newest = joinTime(oldest[0].Score), joinTime(newest[0].Score)
		// The due index may hold a group early (lib/aggregate.lua): the
		// time shown is the policy's, as claim_batch reckons it.
		var full time.Time
		if r.full != nil && len(r.full.Val()) > 0 {
			full = joinTime(r.full.Val()[0].Score)
		}
		r.info.Due = r.policy.DueAt(full, r.info.Oldest, r.info.Newest)
		out = append(out, r.info)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

// joinTime is the time of a member's join stamp (ms × 1000 plus a
// sequence number; lua/lib/aggregate.lua).
func joinTime(stamp float64) time.Time { return time.UnixMilli(int64(stamp) / 1000) }

// aggregating reads the count of members waiting or in batches of qk's
// queue from cmd, a GET of qk.aggCount: 0 when the key is missing.
func aggregating(cmd *goredis.StringCmd) (int, error) {
	return counter("GET aggregation count", cmd)
}

// counter reads a count a script keeps with INCR and DECR (what, for
// errors): none is 0.
func counter(what string, cmd *goredis.StringCmd) (int, error) {
	v, err := cmd.Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return 0, nil
	case err != nil:
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, malformed(what, nil, "%s, want a decimal count", describe(v))
	}
	return clampInt(n), nil
}
