package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The aggregation floor: what sending aggregation members costs on this
// machine when a send does the least any library's send can: one script
// that writes the member's hash, adds it to its group's zset and lists
// the group (asynq's add-to-group does as much, and an existence check),
// with no policy read, no clock and no due index. The members, their keys
// and their senders are the aggregate workload's (b.n members over
// b.n/aggMaxSize keys, aggSenders goroutines), sent from this program
// with go-redis, as the libraries' senders are. It is measured twice: one
// call a member, and members combined, each call carrying every send that
// waited for it, one call in flight (with aggSenders senders that wait for
// their replies, a call carries at most aggSenders; the members per call
// are reported). More calls in flight carried fewer members each (2.6 a
// call with 2, 1.5 with 4: aggregate-floor-2026-11-27.md), and none was
// faster than one call a member.

// floorAdd adds one member: KEYS[1] its hash, KEYS[2] its group's zset,
// KEYS[3] the set of groups; ARGV[1] its message, ARGV[2] its group,
// ARGV[3] its id, also its score.
const floorAdd = `redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "aggregating", "group", ARGV[2])
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[3])
redis.call("SADD", KEYS[3], ARGV[2])
return 1`

// floorAddMany adds the members of ARGV, three items each: message, group
// and id, writing the keys floorAdd's caller names (the floorKeys of the
// id and group; undeclared, which a single server allows).
const floorAddMany = `for i = 1, #ARGV, 3 do
	redis.call("HSET", "floor:t:" .. ARGV[i + 2], "msg", ARGV[i], "state", "aggregating", "group", ARGV[i + 1])
	redis.call("ZADD", "floor:g:" .. ARGV[i + 1], ARGV[i + 2], ARGV[i + 2])
	redis.call("SADD", "floor:groups", ARGV[i + 1])
end
return 1`

// floorKeys returns the keys of member id of group g: its hash, its
// group's zset and the set of groups (as floorAddMany names them).
func floorKeys(id, g string) []string {
	return []string{"floor:t:" + id, "floor:g:" + g, "floor:groups"}
}

// floorMember returns member i's id and group, of keys groups (the
// aggregate workload's keys: member i joins key i mod keys).
func floorMember(i, keys int) (id, g string) {
	return strconv.Itoa(i), "key-" + strconv.Itoa(i%keys)
}

// floorMessage is a member's message as machinist stores it in the
// aggregate workload (its signature without UUID and queue, which the
// task hash's key and queue give): 83 bytes.
const floorMessage = `{"Name":"member","Args":[{"Type":"int64","Value":12345}],"AggregationKey":"key-17"}`

// floor measures the aggregation floor (above) for rep.
func (b *bench) floor(ctx context.Context, rep int) {
	keys := max(1, b.n/aggMaxSize)
	members := keys * aggMaxSize
	for _, combined := range []bool{false, true} {
		if ctx.Err() != nil {
			return
		}
		variant := fmt.Sprintf("floor: %d aggregation members sent, the least script a member (no check, no clock), go-redis, %d goroutines", members, aggSenders)
		if combined {
			variant += ", combined, one call in flight"
		} else {
			variant += ", one call a member"
		}
		rate, cpu, perCall, err := b.floorRun(ctx, keys, members, combined)
		const lib = "redis"
		if err != nil {
			b.addErr(lib, "ceiling", variant, "members/s", rep, err)
			continue
		}
		b.add(lib, "ceiling", variant, "members/s", rep, rate)
		b.add(lib, "ceiling", variant+": CPU (Redis + this program)", "µs/member", rep, cpu)
		if combined {
			b.add(lib, "ceiling", variant+": members per call", "members", rep, perCall)
		}
	}
}

// floorRun sends members members over keys keys as floor says, combined
// or not, on a Redis it has emptied, and returns the members sent a
// second, the CPU a member took (Redis and this process) and, combined,
// the members a call carried on average.
func (b *bench) floorRun(ctx context.Context, keys, members int, combined bool) (rate, cpu, perCall float64, err error) {
	if err := b.redis.reset(ctx); err != nil {
		return 0, 0, 0, err
	}
	client := goredis.NewClient(&goredis.Options{Addr: b.redis.addr})
	defer client.Close()
	one, many := goredis.NewScript(floorAdd), goredis.NewScript(floorAddMany)
	for _, s := range []*goredis.Script{one, many} {
		if err := s.Load(ctx, client).Err(); err != nil {
			return 0, 0, 0, err
		}
	}
	send := func(i int) error {
		id, g := floorMember(i, keys)
		return one.EvalSha(ctx, client, floorKeys(id, g), floorMessage, g, id).Err()
	}
	var calls func() int64
	if combined {
		var stop func()
		send, calls, stop = floorCombiner(ctx, client, many, keys)
		defer stop()
	}
	in0, err := b.redis.info(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	cpu0 := processCPU()
	start := time.Now()
	err = fanOut(ctx, members, aggSenders, send)
	elapsed := time.Since(start)
	cpu1 := processCPU()
	if err != nil {
		return 0, 0, 0, err
	}
	in1, err := b.redis.info(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	rate = float64(members) / elapsed.Seconds()
	cpu = ((in1.cpuSeconds-in0.cpuSeconds)*1e6 + float64((cpu1 - cpu0).Microseconds())) / float64(members)
	if calls != nil {
		perCall = float64(members) / float64(calls())
	}
	return rate, cpu, perCall, nil
}

// floorCombiner returns a send that hands member i to a goroutine that
// sends every member waiting at once in one call of many; calls, how many
// calls it made; and a stop that ends it.
func floorCombiner(ctx context.Context, client *goredis.Client, many *goredis.Script, keys int) (send func(int) error, calls func() int64, stop func()) {
	type req struct {
		i    int
		done chan error
	}
	reqs := make(chan req, 1024)
	var made atomic.Int64
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for r := range reqs {
			batch := []req{r}
		gather:
			for len(batch) < 256 {
				select {
				case r := <-reqs:
					batch = append(batch, r)
				default:
					break gather
				}
			}
			args := make([]interface{}, 0, 3*len(batch))
			for _, r := range batch {
				id, g := floorMember(r.i, keys)
				args = append(args, floorMessage, g, id)
			}
			err := many.EvalSha(ctx, client, nil, args...).Err()
			made.Add(1)
			for _, r := range batch {
				r.done <- err
			}
		}
	}()
	send = func(i int) error {
		done := make(chan error, 1)
		reqs <- req{i: i, done: done}
		return <-done
	}
	stop = func() {
		close(reqs)
		<-stopped
	}
	return send, made.Load, stop
}
