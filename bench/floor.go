package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The aggregation floor: what sending aggregation members costs on this
// machine when a send does the least any library's can, whatever
// library it is: one script that writes the member's hash, adds it to its
// group's zset and lists the group (asynq's add-to-group does as much,
// and an existence check), with no policy read, no clock and no due
// index. The members, their keys and their senders are the aggregate
// workload's (b.n members over b.n/aggMaxSize keys, aggSenders
// goroutines), sent from this program with go-redis, as the libraries'
// senders are. It is measured twice: one call a member, and members
// combined, each call carrying every send that waited for it (floorLanes
// calls in flight), to show whether sharing a round trip pays here.

// floorAdd adds one member: KEYS[1] its hash, KEYS[2] its group's zset,
// KEYS[3] the set of groups; ARGV[1] its message, ARGV[2] its group,
// ARGV[3] its score, ARGV[4] its id.
const floorAdd = `redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "aggregating", "group", ARGV[2])
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[4])
redis.call("SADD", KEYS[3], ARGV[2])
return 1`

// floorAddMany adds the members of ARGV, four items each: its hash key,
// message, group and id (the zset and set keys derive from the group).
const floorAddMany = `for i = 1, #ARGV, 4 do
	redis.call("HSET", ARGV[i], "msg", ARGV[i + 1], "state", "aggregating", "group", ARGV[i + 2])
	redis.call("ZADD", "floor:g:" .. ARGV[i + 2], i, ARGV[i + 3])
	redis.call("SADD", "floor:groups", ARGV[i + 2])
end
return 1`

// floorLanes is how many combined calls may be in flight at once.
const floorLanes = 4

// floorMessage is the size of a member's message in the aggregate
// workload (a signature with one int64 argument and its key).
const floorMessage = `{"Name":"member","Args":[{"Type":"int64","Value":12345}],"AggregationKey":"key-17"}`

// floor measures the aggregation floor (above) for rep.
func (b *bench) floor(ctx context.Context, rep int) {
	const lib = "redis"
	keys := max(1, b.n/aggMaxSize)
	members := keys * aggMaxSize
	client := goredis.NewClient(&goredis.Options{Addr: b.redis.addr})
	defer client.Close()
	one, many := goredis.NewScript(floorAdd), goredis.NewScript(floorAddMany)
	for _, combined := range []bool{false, true} {
		variant := fmt.Sprintf("floor: %d aggregation members sent, the least script a member (no check, no clock), go-redis, %d goroutines", members, aggSenders)
		if combined {
			variant += fmt.Sprintf(", combined (%d calls in flight)", floorLanes)
		} else {
			variant += ", one call a member"
		}
		rate, cpu := variant, variant+": CPU (Redis + this program)"
		fail := func(err error) {
			b.addErr(lib, "ceiling", rate, "members/s", rep, err)
			b.addErr(lib, "ceiling", cpu, "µs/member", rep, err)
		}
		if err := b.redis.reset(ctx); err != nil {
			fail(err)
			return
		}
		if err := one.Load(ctx, client).Err(); err != nil {
			fail(err)
			return
		}
		if err := many.Load(ctx, client).Err(); err != nil {
			fail(err)
			return
		}
		send := func(i int) error {
			g := "key-" + strconv.Itoa(i%keys)
			id := strconv.Itoa(i)
			return one.EvalSha(ctx, client, []string{"floor:t:" + id, "floor:g:" + g, "floor:groups"}, floorMessage, g, i, id).Err()
		}
		var stop func()
		if combined {
			send, stop = floorCombiner(ctx, client, many, keys)
		}
		in0, err := b.redis.info(ctx)
		if err != nil {
			fail(err)
			return
		}
		cpu0 := processCPU()
		start := time.Now()
		err = fanOut(ctx, members, aggSenders, send)
		elapsed := time.Since(start)
		cpu1 := processCPU()
		if stop != nil {
			stop()
		}
		if err != nil {
			fail(err)
			return
		}
		in1, err := b.redis.info(ctx)
		if err != nil {
			fail(err)
			return
		}
		b.add(lib, "ceiling", rate, "members/s", rep, float64(members)/elapsed.Seconds())
		b.add(lib, "ceiling", cpu, "µs/member", rep, ((in1.cpuSeconds-in0.cpuSeconds)*1e6+float64((cpu1-cpu0).Microseconds()))/float64(members))
	}
}

// floorCombiner returns a send that hands member i to floorLanes
// goroutines, each sending every member waiting at once in one call of
// many, and a stop that ends them.
func floorCombiner(ctx context.Context, client *goredis.Client, many *goredis.Script, keys int) (send func(int) error, stop func()) {
	type req struct {
		i    int
		done chan error
	}
	reqs := make(chan req, 1024)
	var wg sync.WaitGroup
	for range floorLanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				args := make([]interface{}, 0, 4*len(batch))
				for _, r := range batch {
					id := strconv.Itoa(r.i)
					args = append(args, "floor:t:"+id, floorMessage, "key-"+strconv.Itoa(r.i%keys), id)
				}
				err := many.EvalSha(ctx, client, nil, args...).Err()
				for _, r := range batch {
					r.done <- err
				}
			}
		}()
	}
	send = func(i int) error {
		done := make(chan error, 1)
		reqs <- req{i: i, done: done}
		return <-done
	}
	stop = func() {
		close(reqs)
		wg.Wait()
	}
	return send, stop
}
