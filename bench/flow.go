package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// ---- flow -------------------------------------------------------------
//
// Workflows of any shape, send to result: shapes only machinist has (a
// diamond, a 3-level nested workflow, a fan-out/fan-in), and the two
// shapes BullMQ's FlowProducer has too (a parent with 1000 children, a
// 3-level tree), with the Redis CPU each node costs. Each shape is sent
// once to warm up, then flowTimed times (flowTimedBig for the 1000-node
// ones); the median counts, and the Redis CPU is that of every run
// (warm-up included) divided by the nodes they ran.

const (
	flowTimed    = 5
	flowTimedBig = 3
	flowTimeout  = 60 * time.Second
)

// flowShape is a workflow the flow workload runs.
type flowShape struct {
	variant string
	bullmq  string // the shape's name in bullmq/flow.js; "" when only machinist runs it
	nodes   int
	want    int64
	build   func() (*tasks.Workflow, error)
}

func addSig(args ...int64) *tasks.Signature {
	return machinistSignature(Task{Name: taskAdd, Args: args})
}
func sumSig() *tasks.Signature { return &tasks.Signature{Name: taskSum} }

// flowShapes are the shapes, in the order they run. The results follow
// machinery's rules: a node's parents' results are appended to its args.
func flowShapes() []flowShape {
	return []flowShape{
		{
			variant: "diamond of 4 add, send to result", nodes: 4, want: 7, // add(add(1, 2), add(2, 2)) after a = 2
			build: func() (*tasks.Workflow, error) {
				return tasks.NewDAG("diamond").
					Add("a", addSig(1, 1)).
					Add("b", addSig(1), "a").
					Add("c", addSig(2), "a").
					Add("d", addSig(), "b", "c").
					Build()
			},
		},
		{
			variant: "chain → group of 3 → chord of 3 + sum, send to result", nodes: 8, want: 36,
			build: func() (*tasks.Workflow, error) {
				return tasks.NewChainOf(
					addSig(1, 1), // 2
					tasks.GroupOf(addSig(1), addSig(2), addSig(3)),                       // 3, 4, 5
					tasks.ChordOf(tasks.GroupOf(addSig(), addSig(), addSig()), sumSig()), // 12 each, then 36
				)
			},
		},
		{
			variant: "fan-out/fan-in: add → 1000 add → sum, send to result", nodes: 1002, want: 1000*2 + 500500,
			build: func() (*tasks.Workflow, error) {
				fan := make([]tasks.Node, 1000)
				for i := range fan {
					fan[i] = addSig(int64(i + 1))
				}
				return tasks.NewChainOf(addSig(1, 1), tasks.GroupOf(fan...), sumSig())
			},
		},
		{
			variant: "parent sum with 1000 add children, send to result", bullmq: "children1000", nodes: 1001, want: 1001000,
			build: func() (*tasks.Workflow, error) {
				children := make([]tasks.Node, 1000)
				for i := range children {
					children[i] = addSig(int64(i+1), int64(i+1))
				}
				return tasks.NewChordOf(tasks.GroupOf(children...), sumSig())
			},
		},
		{
			variant: "3-level tree: sum ← 10 sum ← 10 add each, send to result", bullmq: "tree3", nodes: 111, want: 200,
			build: func() (*tasks.Workflow, error) {
				subtrees := make([]tasks.Node, 10)
				for i := range subtrees {
					leaves := make([]tasks.Node, 10)
					for j := range leaves {
						leaves[j] = addSig(1, 1)
					}
					subtrees[i] = tasks.ChordOf(tasks.GroupOf(leaves...), sumSig())
				}
				return tasks.NewChordOf(tasks.GroupOf(subtrees...), sumSig())
			},
		},
	}
}

// flowLibs are the libraries the flow workload runs (main runs it for
// those of -libs among them); the others have no workflows of these
// shapes.
var flowLibs = []string{"machinist", "bullmq"}

func (b *bench) flow(ctx context.Context, lib string, rep int) {
	for _, s := range flowShapes() {
		if ctx.Err() != nil {
			return
		}
		if lib == "bullmq" && s.bullmq == "" {
			b.addStatus(lib, "flow", s.variant, "ms", rep, statusNA, "trees only: no DAG, no nesting of chains and groups")
			continue
		}
		if b.rep.Failed(lib, "flow", s.variant) {
			fmt.Fprintf(b.log, "  %s flow %q: not repeated after a failure\n", lib, s.variant)
			continue
		}
		timed := flowTimed
		if s.nodes > 200 {
			timed = flowTimedBig
		}
		if err := b.redis.reset(ctx); err != nil {
			b.addErr(lib, "flow", s.variant, "ms", rep, err)
			continue
		}
		before, err := b.redis.info(ctx)
		if err != nil {
			b.addErr(lib, "flow", s.variant, "ms", rep, err)
			continue
		}
		var times []time.Duration
		runs := 0
		if lib == "bullmq" {
			var perRun int
			times, runs, perRun, err = bullmqFlow(ctx, b.redis.addr, s.bullmq, timed)
			if err == nil && perRun != s.nodes {
				err = fmt.Errorf("bullmq ran %d nodes a run, want %d", perRun, s.nodes)
			}
		} else {
			times, runs, err = b.machinistFlow(ctx, s, timed)
		}
		if err != nil {
			b.addErr(lib, "flow", s.variant, "ms", rep, err)
			continue
		}
		after, err := b.redis.info(ctx)
		if err != nil {
			b.addErr(lib, "flow", s.variant, "ms", rep, err)
			continue
		}
		slices.Sort(times)
		median := times[len(times)/2]
		b.add(lib, "flow", s.variant, "ms", rep, float64(median.Microseconds())/1e3)
		b.add(lib, "flow", s.variant+", per node", "µs", rep, float64(median.Microseconds())/float64(s.nodes))
		nodes := float64(runs * s.nodes)
		b.add(lib, "flow", s.variant+": Redis CPU per node", "µs", rep, (after.cpuSeconds-before.cpuSeconds)*1e6/nodes)
		b.add(lib, "flow", s.variant+": Redis commands per node", "commands", rep, float64(after.calls-before.calls)/nodes)
	}
}

// machinistFlow runs shape s on machinist with a worker of concurrency
// 10, as the workflow workload does: a warm-up, then timed runs. It
// returns the timed runs' durations and the number of runs in all.
func (b *bench) machinistFlow(ctx context.Context, s flowShape, timed int) ([]time.Duration, int, error) {
	sum := func(args []int64) (int64, error) {
		var t int64
		for _, a := range args {
			t += a
		}
		return t, nil
	}
	d, err := newDriver("machinist")
	if err != nil {
		return nil, 0, err
	}
	if err := d.Open(ctx, b.redis.addr, Handlers{taskAdd: sum, taskSum: sum}); err != nil {
		return nil, 0, err
	}
	defer d.Close()
	stop, err := d.StartWorker(10)
	if err != nil {
		return nil, 0, err
	}
	defer stop()
	server := d.(*machinistDriver).server
	wctx, cancel := context.WithTimeout(ctx, flowTimeout)
	defer cancel()
	run := func() (time.Duration, error) {
		wf, err := s.build()
		if err != nil {
			return 0, err
		}
		start := time.Now()
		res, err := server.SendWorkflowWithContext(wctx, wf)
		if err != nil {
			return 0, err
		}
		got, err := machinistInt(res.GetWithContext(wctx, resultPoll))
		elapsed := time.Since(start)
		if err != nil {
			return 0, err
		}
		if got != s.want {
			return 0, fmt.Errorf("result %d, want %d", got, s.want)
		}
		return elapsed, nil
	}
	if _, err := run(); err != nil {
		return nil, 0, fmt.Errorf("warm-up: %w", err)
	}
	times := make([]time.Duration, 0, timed)
	for range timed {
		t, err := run()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, 0, fmt.Errorf("no result in %s: %w", flowTimeout, err)
			}
			return nil, 0, err
		}
		times = append(times, t)
	}
	return times, timed + 1, nil
}
