package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The workflow step floor: the least a step of a workflow can cost on the
// machine it runs on, the rows the workflow rows are compared with. A
// step is one settle script, which writes the step's result and enqueues
// what follows it, and the wake of the worker that takes it (BLPOP), sent
// from this program with go-redis, as the libraries' workers send theirs;
// no state machine, no lease, no message to decode. A chain of 10 and a
// chord of 100 (with its callback) run on 10 such workers, timed from the
// send to the result (a BLPOP woken by the last settle), warmed up once
// and timed workflowTimed times, the median counting, as the workflow rows
// are.

// floorSettle settles a step: KEYS[1] its result key, KEYS[2] the list of
// what follows (the queue, or the result list), KEYS[3] the chord's count
// of finished members; ARGV[1] the step's result, ARGV[2] what follows,
// ARGV[3] the chord's size (0: not a chord member). A chord member
// enqueues the callback only when it is the last to finish.
const floorSettle = `redis.call("SET", KEYS[1], ARGV[1])
local size = tonumber(ARGV[3])
if size > 0 then
	redis.call("INCRBY", KEYS[3] .. ":sum", ARGV[1])
	if redis.call("INCR", KEYS[3]) < size then
		return 0
	end
	ARGV[2] = "cb:" .. redis.call("GET", KEYS[3] .. ":sum")
end
redis.call("RPUSH", KEYS[2], ARGV[2])
return 1`

const (
	floorQueue   = "floor:q"
	floorResults = "floor:done"
	floorChord   = "floor:chord"
	floorWorkers = 10
)

// stepFloor measures the step floor for rep, a chain of chainLen and a
// chord of chordSize.
func (b *bench) stepFloor(ctx context.Context, rep, chainLen, chordSize int) {
	const lib = "redis"
	for _, f := range []struct {
		variant string
		chord   bool
	}{
		{fmt.Sprintf("floor: chain of %d, a settle script and a BLPOP wake a step, send to result", chainLen), false},
		{fmt.Sprintf("floor: chord of %d and a callback, a settle script and a BLPOP wake a step, send to result", chordSize), true},
	} {
		if ctx.Err() != nil {
			return
		}
		ms, err := b.stepFloorRun(ctx, chainLen, chordSize, f.chord)
		if err != nil {
			b.addErr(lib, "workflow", f.variant, "ms", rep, err)
			continue
		}
		b.add(lib, "workflow", f.variant, "ms", rep, ms)
	}
}

// stepFloorRun runs the floor's chain or chord on a Redis it has emptied,
// with floorWorkers workers, and returns the median time from the send to
// the result, in milliseconds.
func (b *bench) stepFloorRun(ctx context.Context, chainLen, chordSize int, chord bool) (float64, error) {
	if err := b.redis.reset(ctx); err != nil {
		return 0, err
	}
	client := goredis.NewClient(&goredis.Options{Addr: b.redis.addr, PoolSize: 2 * floorWorkers})
	defer client.Close()
	settle := goredis.NewScript(floorSettle)
	if err := settle.Load(ctx, client).Err(); err != nil {
		return 0, err
	}
	wctx, stop := context.WithCancel(ctx)
	var workers sync.WaitGroup
	errs := make(chan error, floorWorkers)
	for range floorWorkers {
		workers.Go(func() {
			if err := floorWorker(wctx, client, settle, chainLen, chordSize); err != nil && wctx.Err() == nil {
				errs <- err
				stop()
			}
		})
	}
	defer func() { stop(); workers.Wait() }()

	run := func() (time.Duration, error) {
		if err := client.Del(ctx, floorChord, floorChord+":sum").Err(); err != nil {
			return 0, err
		}
		start := time.Now()
		var want int64
		if chord {
			members := make([]any, chordSize)
			for i := range members {
				members[i] = "m:" + strconv.Itoa(i+1)
				want += 2 * int64(i+1)
			}
			if err := client.RPush(ctx, floorQueue, members...).Err(); err != nil {
				return 0, err
			}
		} else {
			want = int64(chainLen + 1)
			if err := client.RPush(ctx, floorQueue, "c:1:2").Err(); err != nil {
				return 0, err
			}
		}
		res, err := client.BLPop(wctx, 30*time.Second, floorResults).Result()
		elapsed := time.Since(start)
		if err != nil {
			select {
			case werr := <-errs:
				return 0, werr
			default:
			}
			return 0, err
		}
		if got, _ := strconv.ParseInt(res[1], 10, 64); got != want {
			return 0, fmt.Errorf("result %s, want %d", res[1], want)
		}
		return elapsed, nil
	}
	if _, err := run(); err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	var times []time.Duration
	for range workflowTimed {
		d, err := run()
		if err != nil {
			return 0, err
		}
		times = append(times, d)
	}
	slices.Sort(times)
	return float64(times[len(times)/2].Microseconds()) / 1000, nil
}

// floorWorker takes steps from the queue until ctx ends: a chain step
// "c:i:acc" (acc is the result so far), a chord member "m:i" (its result
// is 2i) or the callback "cb:sum", and settles each.
func floorWorker(ctx context.Context, client *goredis.Client, settle *goredis.Script, chainLen, chordSize int) error {
	for ctx.Err() == nil {
		res, err := client.BLPop(ctx, time.Second, floorQueue).Result()
		if errors.Is(err, goredis.Nil) || ctx.Err() != nil {
			continue
		}
		if err != nil {
			return err
		}
		step := strings.Split(res[1], ":")
		var keys []string
		var args []any
		switch step[0] {
		case "c":
			i, _ := strconv.Atoi(step[1])
			acc, _ := strconv.ParseInt(step[2], 10, 64)
			next, then := strconv.FormatInt(acc+1, 10), floorQueue
			if i == chainLen {
				next, then = step[2], floorResults
			} else {
				next = "c:" + strconv.Itoa(i+1) + ":" + next
			}
			keys, args = []string{"floor:s:" + step[1], then, floorChord}, []any{step[2], next, 0}
		case "m":
			i, _ := strconv.ParseInt(step[1], 10, 64)
			keys, args = []string{"floor:s:m" + step[1], floorQueue, floorChord}, []any{2 * i, "", chordSize}
		case "cb":
			keys, args = []string{"floor:s:cb", floorResults, floorChord}, []any{step[1], step[1], 0}
		default:
			return fmt.Errorf("floor: unknown step %q", res[1])
		}
		if err := settle.EvalSha(ctx, client, keys, args...).Err(); err != nil {
			return err
		}
	}
	return nil
}
