package rdb

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Sharded queues. A queue lives in one hash slot, so on Redis Cluster one
// queue is served by one master however many there are. A logical queue q
// may instead be spread over n shards: q itself and n-1 queues named
// q{k (k a positive integer; user queue names hold no brace, so the name
// says it is a shard and of which queue). Each shard is a whole queue of
// its own (pending, leases, retries, archive, maintainer) in the slot of
// its hash tag "q{k", and the suffixes k are chosen so that the shards
// fall on different masters.
//
// Who decides: the record <prefix>:shards, a hash from q to the suffixes
// of its shards ("7 12": the shards are q, q{7 and q{12). It only grows:
// a process configured with more shards than recorded adds them (raise),
// and every process reads it (every shardRefresh), so that a worker
// consumes every shard any sender may use, whatever its own
// configuration says. Fewer shards in a configuration than recorded
// change nothing: a shard is never dropped while tasks could be in it.
//
// Which shard a task goes to (route): a task with an aggregation key, a
// limit or a unique key goes to the shard its key hashes to, so that the
// key's group, limit or holder lives in one slot; any other task to the
// shard its UUID hashes to, so that a task sent twice meets itself and is
// refused as a duplicate. The hash is rendezvous hashing (each shard
// scores the key; the highest wins), so that raising the count from n to
// m moves only the keys the m-n new shards win, never a key from one old
// shard to another. Order is kept per shard, not across them.
//
// Pause: each shard has its own paused flag. A shard added while its
// queue is paused is paused once, by the first process to see it
// (adoptShards); pausing, resuming and cancelling read the record afresh
// (ShardsNow), so they reach a shard added a moment ago.

// shardRefresh is how long a process uses the shards it read of a queue
// before it reads them again.
const shardRefresh = 5 * time.Second

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// shardSet is what a process knows of a queue's shards.
type shardSet struct {
	names []string  // the queue first, then its shards in the record's order
	read  time.Time // when the record was read
}

// shardTable caches the shard sets of the queues a process uses.
type shardTable struct {
	mu   sync.Mutex
	sets map[string]*shardSet
	want map[string]int // the configured counts (Options.QueueShards)
	// adopted are the shards whose adopted marker this process found set
	// (adoptShards).
	adopted map[string]bool
}

// shardName is the name of q's shard with suffix k.
func shardName(q string, k int) string { return q + "{" + strconv.Itoa(k) }

// Shards returns the queues that hold queue's tasks: queue alone when it
// is not sharded, else queue and its shards, from the record read at most
// shardRefresh ago (raised first to the configured count, when that is
// higher). A shard's name (q{k) gives that shard alone, if q's record has
// it. When the record cannot be read, the shards read before are used.
func (s *Store) Shards(ctx context.Context, queue string) ([]string, error) {
	return s.shardsOf(ctx, queue, false)
}

// ShardsNow is Shards with the record read now: for pausing, resuming and
// cancelling, which must reach a shard added a moment ago.
func (s *Store) ShardsNow(ctx context.Context, queue string) ([]string, error) {
	return s.shardsOf(ctx, queue, true)
}

func (s *Store) shardsOf(ctx context.Context, queue string, now bool) ([]string, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	if q, ok := store.ShardOf(queue); ok {
		names, err := s.shardsOf(ctx, q, now)
		if err == nil && !slices.Contains(names, queue) && !now {
			// Added since the record was read, perhaps.
			names, err = s.shardsOf(ctx, q, true)
		}
		if err != nil {
			return nil, err
		}
		if !slices.Contains(names, queue) {
			return nil, fmt.Errorf("queue %q: %w", queue, errNoSuchShard)
		}
		return []string{queue}, nil
	}
	t := &s.shards
	t.mu.Lock()
	set := t.sets[queue]
	want := t.want[queue]
	t.mu.Unlock()
	if set != nil && !now && time.Since(set.read) < shardRefresh {
		return set.names, nil
	}
	// With shards read before, one try: they serve if it fails.
	names, err := s.readShards(ctx, queue, set == nil)
	if err == nil && len(names) < want {
		names, err = s.raiseShards(ctx, queue, want)
	}
	if err != nil {
		if set != nil && ctx.Err() == nil {
			s.log.Warn("reading a queue's shards failed: using those read before", "queue", queue,
				"shards", len(set.names), "error", err)
			s.keepShards(queue, set.names) // not read again for shardRefresh
			return set.names, nil
		}
		if want == 0 {
			// Reading the record is a step of every call on the queue; its
			// failure (Redis down, most often) is the call's, with nothing
			// to say about shards the caller did not configure.
			return nil, err
		}
		return nil, fmt.Errorf("shards of queue %s: %w", queue, err)
	}
	if len(names) > 1 {
		// Shards this process has not seen may be new: each follows its
		// queue's pause once (whoever raised the record may have died
		// before it got to that).
		if err := s.adoptShards(ctx, names[1:], queue); err != nil {
			// Tried again at the next read: the shards serve meanwhile.
			s.log.Warn("making a queue's new shards follow its pause failed", "queue", queue, "error", err)
		}
	}
	return s.keepShards(queue, names), nil
}

// keepShards caches names as queue's shards, read now, unless the cache
// has more (a read that raced this one and saw a later record: the record
// only grows), and returns what it keeps.
func (s *Store) keepShards(queue string, names []string) []string {
	t := &s.shards
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sets == nil {
		t.sets = make(map[string]*shardSet)
	}
	if cur := t.sets[queue]; cur != nil && len(cur.names) > len(names) {
		names = cur.names
	}
	t.sets[queue] = &shardSet{names: names, read: time.Now()}
	return names
}

// errNoSuchShard says a name reads as a shard (q{k) that its queue's
// record does not have: a user's queue name may hold no brace.
var errNoSuchShard = errors.New("names must not contain braces (q{k names a shard of queue q, and q has no such shard)")

// ForgetShards deletes queue's field of the shard record, once its shards
// are removed (RemoveQueue): a process configured with shards for it
// records them again.
func (s *Store) ForgetShards(ctx context.Context, queue string) error {
	if err := s.client.HDel(ctx, s.keys.shards(), queue).Err(); err != nil {
		return fmt.Errorf("forget the shards of %s: %w", queue, err)
	}
	return nil
}

// readShards reads queue's record: queue, then its shards.
func (s *Store) readShards(ctx context.Context, queue string, retried bool) ([]string, error) {
	raw, err := s.shardRecord(ctx, queue, retried)
	if err != nil {
		return nil, err
	}
	return shardNames(queue, raw)
}

// shardRecord is queue's field of the record, "" when it has none; with
// retried, read again while Redis cannot answer, as every call is.
func (s *Store) shardRecord(ctx context.Context, queue string, retried bool) (string, error) {
	var raw string
	read := func() error {
		// On the way of every send, when the record is due to be read
		// again: the send returns at its deadline.
		return transport.Detach(ctx, func() error {
			v, err := s.client.HGet(ctx, s.keys.shards(), queue).Result()
			if errors.Is(err, goredis.Nil) {
				v, err = "", nil
			}
			raw = v
			return err
		})
	}
	var err error
	if retried {
		err = transport.Again(ctx, read, transport.Retry{})
	} else {
		err = read()
	}
	if err != nil {
		return "", err // raw may still be written: not read
	}
	return raw, nil
}

// shardNames parses a record's field: the suffixes of queue's shards.
func shardNames(queue, raw string) ([]string, error) {
	names := []string{queue}
	for _, f := range strings.Fields(raw) {
		k, err := strconv.Atoi(f)
		if err != nil || k < 1 {
			return nil, fmt.Errorf("the shard record %q holds %q, not a shard suffix", raw, f)
		}
		names = append(names, shardName(queue, k))
	}
	return names, nil
}

// raiseShards adds shards to queue's record until it has n, placing each
// new one on the master (on Cluster) that holds the fewest of queue's
// shards, and returns them all. The write is a compare-and-set of the
// field, so processes raising at once agree on one record.
func (s *Store) raiseShards(ctx context.Context, queue string, n int) ([]string, error) {
	for {
		raw, err := s.shardRecord(ctx, queue, true)
		if err != nil {
			return nil, err
		}
		names, err := shardNames(queue, raw)
		if err != nil {
			return nil, err
		}
		if len(names) >= n {
			return names, nil
		}
		owner, err := s.slotOwners(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the cluster's slots: %w", err)
		}
		suffixes := pickShards(queue, raw, n, owner)
		var ok bool
		err = transport.Again(ctx, func() error {
			ok, err = raiseShardsScript.Run(ctx, s.client, []string{s.keys.shards()}, queue, raw, suffixes).Bool()
			return err
		}, transport.Retry{})
		if err != nil {
			return nil, err
		}
		if ok {
			return shardNames(queue, suffixes)
		}
		// Another process raised the record meanwhile: start again from it.
	}
}

// adoptShards makes each of shards, shards of queue, follow queue's pause
// once, the first time any process sees it: the first to set the shard's
// adopted marker pauses it if queue is paused. Once only, so that a
// resume is not undone by a process that starts after it, nor a shard
// resumed on its own paused again. A process that dies between the
// marker and the pause leaves that shard running; QueueInfo then says
// the queue is not paused, and pausing it again pauses every shard.
func (s *Store) adoptShards(ctx context.Context, shards []string, queue string) error {
	t := &s.shards
	var fresh []string
	t.mu.Lock()
	for _, sh := range shards {
		if !t.adopted[sh] {
			fresh = append(fresh, sh)
		}
	}
	t.mu.Unlock()
	if len(fresh) == 0 {
		return nil
	}
	cmds := make([]*goredis.BoolCmd, len(fresh))
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, sh := range fresh {
			cmds[i] = p.SetNX(ctx, s.keys.queue(sh).adopted, "1", 0)
		}
		return nil
	}); err != nil {
		return err
	}
	var won []string
	for i, c := range cmds {
		if c.Val() {
			won = append(won, fresh[i])
		}
	}
	if len(won) > 0 {
		paused, err := s.client.Exists(ctx, s.keys.queue(queue).paused).Result()
		if err != nil {
			return err
		}
		for _, sh := range won {
			if paused == 0 {
				break
			}
			if err := s.PauseQueue(ctx, sh); err != nil {
				return err
			}
		}
	}
	t.mu.Lock()
	if t.adopted == nil {
		t.adopted = make(map[string]bool)
	}
	for _, sh := range fresh {
		t.adopted[sh] = true
	}
	t.mu.Unlock()
	return nil
}

// raiseShardsScript sets field ARGV[1] of the record KEYS[1] to ARGV[3]
// if it still holds ARGV[2] ("" for none), and says whether it did.
var raiseShardsScript = goredis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if cur ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1`)

// slotOwners returns, on Cluster, the master that serves each hash slot
// (an index per master); nil elsewhere, where every slot is on one server.
func (s *Store) slotOwners(ctx context.Context) ([]int, error) {
	cc, ok := s.client.(*goredis.ClusterClient)
	if !ok {
		return nil, nil
	}
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	owner := make([]int, clusterSlots)
	for i := range owner {
		owner[i] = -1
	}
	masters := make(map[string]int)
	for _, r := range slots {
		if len(r.Nodes) == 0 {
			continue
		}
		m, ok := masters[r.Nodes[0].Addr]
		if !ok {
			m = len(masters)
			masters[r.Nodes[0].Addr] = m
		}
		for slot := r.Start; slot <= r.End && slot < clusterSlots; slot++ {
			owner[slot] = m
		}
	}
	return owner, nil
}

// pickShards returns the record of queue with n shards: the suffixes of
// raw, then new ones. With owner (the master of each slot), each new
// shard goes to a master with the fewest of queue's shards, the first
// such master by index; without, the new suffixes are the smallest
// unused.
func pickShards(queue, raw string, n int, owner []int) string {
	used := make(map[int]bool)
	suffixes := strings.Fields(raw)
	for _, f := range suffixes {
		k, _ := strconv.Atoi(f)
		used[k] = true
	}
	load := make(map[int]int) // master → shards of queue on it
	masters := 0
	for _, m := range owner {
		masters = max(masters, m+1)
	}
	if owner != nil {
		load[owner[Slot(queue)]]++
		for k := range used {
			load[owner[Slot(shardName(queue, k))]]++
		}
	}
	for len(suffixes)+1 < n {
		target := -1
		for m := 0; m < masters; m++ {
			if target < 0 || load[m] < load[target] {
				target = m
			}
		}
		k := 1
		for ; ; k++ {
			if used[k] {
				continue
			}
			// Without a cluster any suffix will do; on one, one whose slot
			// is on the target (a master serves about 16384/masters slots,
			// so this ends after about masters tries). A cluster with
			// unserved slots may have no such suffix among the first
			// million: take any then.
			if target < 0 || owner[Slot(shardName(queue, k))] == target || k > 1_000_000 {
				break
			}
		}
		used[k] = true
		suffixes = append(suffixes, strconv.Itoa(k))
		if target >= 0 {
			load[owner[Slot(shardName(queue, k))]]++
		}
	}
	return strings.Join(suffixes, " ")
}

// route returns the queue sig goes to: its RoutingKey when that is not
// sharded (or names a shard), else the shard its key or UUID hashes to
// (see the top of this file).
func (s *Store) route(ctx context.Context, sig *tasks.Signature) (string, error) {
	q := sig.RoutingKey
	names, err := s.Shards(ctx, q)
	if err != nil {
		return "", err
	}
	if len(names) == 1 {
		return names[0], nil
	}
	key, err := shardKey(sig)
	if err != nil {
		return "", fmt.Errorf("queue %s has %d shards: %w", q, len(names), err)
	}
	if key == "" {
		key = sig.UUID
	}
	return rendezvous(key, names), nil
}

// rendezvous returns the name of names that scores highest for key.
func rendezvous(key string, names []string) string {
	best, top := 0, uint64(0)
	for i, n := range names {
		h := fnv.New64a()
		_, _ = h.Write([]byte(key))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(n))
		if v := mix(h.Sum64()); i == 0 || v > top {
			best, top = i, v
		}
	}
	return names[best]
}

// mix is a finalizer (splitmix64's) that spreads FNV's output, whose high
// bits vary little between keys that differ only at their end.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// shardKey is what decides sig's shard: its aggregation group, its limit
// key or its unique key (the one it has), or "" for none.
func shardKey(sig *tasks.Signature) (string, error) {
	var keys []string
	if sig.AggregationKey != "" {
		keys = append(keys, "a\n"+aggGroupID(sig.Name, sig.AggregationKey))
	}
	if sig.Limit != nil {
		keys = append(keys, "l\n"+sig.Limit.Key)
	}
	if sig.UniqueFor > 0 {
		keys = append(keys, "u\n"+tasks.UniqueKeyOf(sig))
	}
	switch len(keys) {
	case 0:
		return "", nil
	case 1:
		return keys[0], nil
	}
	return "", fmt.Errorf("task %s: %w", sig.UUID, store.ErrShardKeys)
}

// Slot is the Redis Cluster hash slot of a queue's keys: the CRC16 of its
// name (the keys' hash tag) modulo 16384.
func Slot(queue string) int { return int(crc16([]byte(queue)) % clusterSlots) }

// crc16 is CRC-16/XMODEM, Redis Cluster's key hash.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
