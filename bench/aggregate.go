package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The aggregate workload's policy, the same for every library: a group is
// released at aggMaxSize members, or aggGrace after its newest member
// joined, or aggMaxDelay after its oldest. The members of a key are sent
// interleaved with the other keys', so every group fills towards the end of
// the sending; as long as sending takes less than aggMaxDelay and never
// stalls for aggGrace, MaxSize is what releases them (the run reports the
// aggregates released smaller).
const (
	aggMaxSize     = 100
	aggGrace       = time.Second
	aggMaxDelay    = 5 * time.Second
	aggConcurrency = 10 // as the e2e c=10 row
	aggSenders     = 8  // as the enqueue and e2e sends
	aggTimeout     = time.Minute
)

// aggregate sends keys × aggMaxSize taskMember tasks, member i (its id,
// its only argument) to key i mod keys, from aggSenders goroutines, to a
// running worker of concurrency aggConcurrency; the clock runs from the
// first send until the taskBatch aggregates have carried as many member
// ids as were sent. Each id must then have run exactly once.
func (b *bench) aggregate(ctx context.Context, lib string, rep int) {
	keys := max(1, b.n/aggMaxSize)
	members := keys * aggMaxSize
	variant := fmt.Sprintf("%d members over %d keys, c=%d", members, keys, aggConcurrency)
	row := func(what string) string { return variant + ": " + what }
	type line struct{ variant, unit string }
	var (
		rate    = line{variant, "members/s"}
		sending = line{row("sending the members"), "ms"}
		release = line{row("from the last send to the last aggregate run"), "ms"}
		runs    = line{row("aggregates run"), "aggregates"}
		small   = line{row(fmt.Sprintf("aggregates of fewer than %d members", aggMaxSize)), "aggregates"}
		lost    = line{row("members lost (never run)"), "members"}
		twice   = line{row("members run more than once"), "members"}
		cmds    = line{row("Redis commands"), "per member"}
		rcpu    = line{row("Redis CPU"), "µs/member"}
		pcpu    = line{row("bench process CPU (senders + worker)"), "µs/member"}
	)
	all := []line{rate, sending, release, runs, small, lost, twice, cmds, rcpu, pcpu}
	fail := func(err error) {
		for _, l := range all {
			b.addErr(lib, "aggregate", l.variant, l.unit, rep, err)
		}
	}

	counts := make([]atomic.Int32, members)
	var total, batches, smaller, alone, strangers atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	record := func(ids []int64) {
		for _, id := range ids {
			if id < 0 || id >= int64(members) {
				strangers.Add(1)
				continue
			}
			counts[id].Add(1)
		}
		if total.Add(int64(len(ids))) >= int64(members) {
			once.Do(func() { close(done) })
		}
	}
	h := Handlers{
		taskBatch: func(ids []int64) (int64, error) {
			batches.Add(1)
			if len(ids) < aggMaxSize {
				smaller.Add(1)
			}
			record(ids)
			return int64(len(ids)), nil
		},
		// A member that runs by itself was not aggregated: counted, so
		// that the partition check still sees it.
		taskMember: func(ids []int64) (int64, error) {
			alone.Add(int64(len(ids)))
			record(ids)
			return 0, nil
		},
	}

	if err := b.redis.reset(ctx); err != nil {
		fail(err)
		return
	}
	d, err := newDriver(lib)
	if err != nil {
		fail(err)
		return
	}
	ad, ok := d.(AggregatingDriver)
	if !ok {
		fail(fmt.Errorf("%w: %s has no aggregation", errNA, lib))
		return
	}
	agg := Aggregation{MaxSize: aggMaxSize, MaxDelay: aggMaxDelay, GracePeriod: aggGrace}
	if err := ad.OpenAggregating(ctx, b.redis.addr, h, agg); err != nil {
		d.Close()
		if !errors.Is(err, errNA) {
			err = fmt.Errorf("open %s: %w", lib, err)
		}
		fail(err)
		return
	}
	defer d.Close()
	stop, err := d.StartWorker(aggConcurrency)
	if err != nil {
		fail(err)
		return
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()

	groups := make([]string, keys)
	for k := range groups {
		groups[k] = fmt.Sprintf("key-%d", k)
	}
	r := b.redis
	if err := r.resetStat(ctx); err != nil {
		fail(err)
		return
	}
	in0, err := r.info(ctx)
	if err != nil {
		fail(err)
		return
	}
	cpu0 := processCPU()
	start := time.Now()
	if err := sendN(ctx, d, members, aggSenders, func(i int) Task {
		return Task{Name: taskMember, Args: []int64{int64(i)}, Group: groups[i%keys]}
	}); err != nil {
		fail(err)
		return
	}
	sent := time.Since(start)
	finished := wait(ctx, done, aggTimeout)
	elapsed := time.Since(start)
	cpu1 := processCPU()
	in1, infoErr := r.info(ctx)
	stop() // graceful: an aggregate already running is let finish and counted
	stopped = true
	if ctx.Err() != nil {
		return
	}

	var nLost, nTwice int64
	for i := range counts {
		switch c := counts[i].Load(); {
		case c == 0:
			nLost++
		case c > 1:
			nTwice++
		}
	}
	res := Result{Lib: lib, Workload: "aggregate", Variant: rate.variant, Unit: rate.unit, Rep: rep,
		Value: float64(members) / elapsed.Seconds(), Status: statusOK}
	var notes []string
	if !finished {
		res.Value = float64(total.Load()) / elapsed.Seconds()
		res.Status = statusTimeout
		notes = append(notes, fmt.Sprintf("%d of %d members had run %s after the first send", total.Load(), members, aggTimeout))
	}
	if n := alone.Load(); n > 0 {
		notes = append(notes, fmt.Sprintf("%d members ran alone, not aggregated", n))
	}
	if n := strangers.Load(); n > 0 {
		notes = append(notes, fmt.Sprintf("aggregates carried %d ids that were never sent", n))
	}
	if nLost > 0 || nTwice > 0 {
		notes = append(notes, fmt.Sprintf("not a partition: %d members lost, %d run more than once", nLost, nTwice))
	}
	for i, n := range notes {
		if i > 0 {
			res.Note += "; "
		}
		res.Note += n
	}
	b.rep.Add(res)
	fm := float64(members)
	b.add(lib, "aggregate", sending.variant, sending.unit, rep, float64(sent.Microseconds())/1e3)
	if finished {
		b.add(lib, "aggregate", release.variant, release.unit, rep, float64((elapsed-sent).Microseconds())/1e3)
	} else {
		b.rep.Add(Result{Lib: lib, Workload: "aggregate", Variant: release.variant, Unit: release.unit, Rep: rep,
			Value: float64((elapsed - sent).Microseconds()) / 1e3, Bound: ">=", Status: statusTimeout})
	}
	b.add(lib, "aggregate", runs.variant, runs.unit, rep, float64(batches.Load()))
	b.add(lib, "aggregate", small.variant, small.unit, rep, float64(smaller.Load()))
	b.add(lib, "aggregate", lost.variant, lost.unit, rep, float64(nLost))
	b.add(lib, "aggregate", twice.variant, twice.unit, rep, float64(nTwice))
	if infoErr != nil {
		for _, l := range []line{cmds, rcpu} {
			b.addErr(lib, "aggregate", l.variant, l.unit, rep, infoErr)
		}
	} else {
		b.add(lib, "aggregate", cmds.variant, cmds.unit, rep, float64(in1.calls)/fm)
		b.add(lib, "aggregate", rcpu.variant, rcpu.unit, rep, (in1.cpuSeconds-in0.cpuSeconds)*1e6/fm)
	}
	b.add(lib, "aggregate", pcpu.variant, pcpu.unit, rep, float64(cpu1-cpu0)/1e3/fm)
}
