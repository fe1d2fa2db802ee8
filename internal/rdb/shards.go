package rdb

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
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
// key's group, limit or holder lives in one slot; a task sent after
// another (a chain's next step, AckSuccess) to the queue it ran in stays
// in its shard; any other task goes to the shard its UUID hashes to, so
// that a task sent twice meets itself and is refused as a duplicate.
// Order is kept per shard, not across them.

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
}

// shardName is the name of q's shard with suffix k.
func shardName(q string, k int) string { return q + "{" + strconv.Itoa(k) }

// Shards returns the queues that hold queue's tasks: queue alone when it
// is not sharded or is a shard itself, else queue and its shards, from
// the record read at most shardRefresh ago (raised first to the
// configured count, when that is higher).
func (s *Store) Shards(ctx context.Context, queue string) ([]string, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	if _, ok := brokers.ShardOf(queue); ok {
		return []string{queue}, nil
	}
	t := &s.shards
	t.mu.Lock()
	set := t.sets[queue]
	want := t.want[queue]
	t.mu.Unlock()
	if set != nil && time.Since(set.read) < shardRefresh {
		return set.names, nil
	}
	names, err := s.readShards(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("shards of queue %s: %w", queue, err)
	}
	if len(names) < want {
		if names, err = s.raiseShards(ctx, queue, want); err != nil {
			return nil, fmt.Errorf("shards of queue %s: %w", queue, err)
		}
	}
	fresh := &shardSet{names: names, read: time.Now()}
	t.mu.Lock()
	if t.sets == nil {
		t.sets = make(map[string]*shardSet)
	}
	t.sets[queue] = fresh
	t.mu.Unlock()
	return names, nil
}

// ShardsOf returns the queues that hold the tasks of each of queues, in
// order: each queue's shards follow it.
func (s *Store) ShardsOf(ctx context.Context, queues []string) ([]string, error) {
	out := make([]string, 0, len(queues))
	for _, q := range queues {
		names, err := s.Shards(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}

// readShards reads queue's record: queue, then its shards.
func (s *Store) readShards(ctx context.Context, queue string) ([]string, error) {
	raw, err := s.shardRecord(ctx, queue)
	if err != nil {
		return nil, err
	}
	return shardNames(queue, raw)
}

// shardRecord is queue's field of the record, "" when it has none.
func (s *Store) shardRecord(ctx context.Context, queue string) (string, error) {
	var raw string
	err := again(ctx, func() error {
		v, err := s.client.HGet(ctx, s.keys.shards(), queue).Result()
		if errors.Is(err, goredis.Nil) {
			v, err = "", nil
		}
		raw = v
		return err
	}, retry{})
	return raw, err
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
		raw, err := s.shardRecord(ctx, queue)
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
		ok, err := again1(ctx, func() (bool, error) {
			return raiseShardsScript.Run(ctx, s.client, []string{s.keys.shards()}, queue, raw, suffixes).Bool()
		})
		if err != nil {
			return nil, err
		}
		if ok {
			names, err := shardNames(queue, suffixes)
			if err != nil {
				return nil, err
			}
			return names, s.pauseNewShards(ctx, names[len(strings.Fields(raw))+1:], queue)
		}
		// Another process raised the record meanwhile: start again from it.
	}
}

// pauseNewShards pauses the shards added to queue while queue is paused,
// so that a paused queue stays paused when it grows shards.
func (s *Store) pauseNewShards(ctx context.Context, added []string, queue string) error {
	paused, err := s.client.Exists(ctx, s.keys.queue(queue).paused).Result()
	if err != nil || paused == 0 {
		return err
	}
	for _, sh := range added {
		if err := s.PauseQueue(ctx, sh); err != nil {
			return err
		}
	}
	return nil
}

// again1 is again for a call with a result.
func again1[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var v T
	err := again(ctx, func() error {
		var err error
		v, err = f()
		return err
	}, retry{})
	return v, err
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
// sharded (or names a shard), else one of its shards (see the top of this
// file). near, when not "", is the shard of the task sig is sent after.
func (s *Store) route(ctx context.Context, sig *tasks.Signature, near string) (string, error) {
	q := sig.RoutingKey
	names, err := s.Shards(ctx, q)
	if err != nil || len(names) == 1 {
		return q, err
	}
	key, err := shardKey(sig)
	if err != nil {
		return "", fmt.Errorf("queue %s has %d shards: %w", q, len(names), err)
	}
	if key == "" && near != "" && brokers.LogicalQueue(near) == q {
		return near, nil
	}
	if key == "" {
		// The UUID: a task sent again goes where it went, to be found
		// there (a duplicate is refused within a queue).
		key = sig.UUID
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return names[h.Sum32()%uint32(len(names))], nil
}

// ErrShardKeys is returned for a task sent to a sharded queue with more
// than one of an aggregation key, a unique key and a limit: each decides
// a shard, and they could disagree.
var ErrShardKeys = errors.New("a task of a sharded queue may have only one of an aggregation key, a unique key and a limit")

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
	return "", fmt.Errorf("task %s: %w", sig.UUID, ErrShardKeys)
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
