package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// aggRegistry is a registry with aggregators.
type aggRegistry struct {
	registry
	aggs map[string]Aggregation
}

func (r aggRegistry) GetAggregators() map[string]Aggregation { return r.aggs }

// A worker paused in its aggregator past the batch's lease writes nothing
// when it resumes: another worker built the same aggregate, which has run,
// and a PENDING write would hide its SUCCESS from every member's result.
func TestAggregatorPausedPastItsLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{
		LeaseDuration: time.Second, RecoverInterval: 50 * time.Millisecond,
		Redis: &config.RedisConfig{NormalTasksPollPeriod: 20},
	})
	h.reg["digest"] = func(n int64) (int64, error) { return n, nil }
	var calls atomic.Int32
	firstIn, release := make(chan struct{}), make(chan struct{})
	reg := aggRegistry{registry: h.reg, aggs: map[string]Aggregation{"member": {
		Policy: brokers.AggregationPolicy{MaxSize: 2},
		Func: func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			if calls.Add(1) == 1 {
				close(firstIn)
				<-release // paused: it ignores its context, as a stopped process would
			}
			return &tasks.Signature{Name: "digest", Args: []tasks.Arg{{Type: "int64", Value: int64(len(members))}}}, nil
		},
	}}}
	steps := map[string]chan string{"a": make(chan string, 8), "b": make(chan string, 8)}
	worker := func(name string) Params {
		p := h.params()
		p.Broker = h.mem // the spy hides the broker's aggregation
		p.Tasks = reg
		p.AggregationStepFunc = func(step string) { steps[name] <- step }
		started := make(chan struct{})
		p.StartedFunc = func() { close(started) }
		defer func() { <-started }()
		h.start(p)
		return p
	}
	worker("a")
	members := []*tasks.Signature{newSig("member"), newSig("member")}
	for _, m := range members {
		m.AggregationKey = "k"
	}
	h.publish(members...)
	recv(t, firstIn, "the first worker to call the aggregator")

	// The lease ends while a is paused; b takes the batch again, builds
	// the same aggregate, and it runs.
	worker("b")
	for step := range steps["b"] {
		if step == "completed" {
			break
		}
	}
	var aggregate string
	waitFor(t, "the aggregate to succeed", func() bool {
		st := h.stateOf(members[0].UUID)
		if st == nil || st.Aggregate == "" {
			return false
		}
		aggregate = st.Aggregate
		return h.state(aggregate) == tasks.StateSuccess
	})

	close(release)
	for step := range steps["a"] {
		if step == "lost" {
			break
		}
		if step == "states" || step == "completed" {
			t.Fatalf("the paused worker went on to %q after its lease ended", step)
		}
	}
	if st := h.state(aggregate); st != tasks.StateSuccess {
		t.Fatalf("the aggregate's state is %q after the paused worker resumed, want %s", st, tasks.StateSuccess)
	}
}
