package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// aggRegistry is a registry with aggregators.
type aggRegistry struct {
	registry
	aggs map[string]Aggregation
}

func (r aggRegistry) GetAggregators() map[string]Aggregation { return r.aggs }

// startStarted starts a worker of p, waits until it has started and
// returns it.
func (h *harness) startStarted(p Params) *runningWorker {
	started := make(chan struct{})
	p.StartedFunc = func() { close(started) }
	r := h.start(p)
	<-started
	return r
}

// publishMembers publishes n members of task "member" with aggregation key
// key, and returns them.
func (h *harness) publishMembers(key string, n int) []*tasks.Signature {
	members := make([]*tasks.Signature, n)
	for i := range members {
		members[i] = newSig("member")
		members[i].AggregationKey = key
	}
	h.publish(members...)
	return members
}

// cutOff is the memory broker as a worker cut off from it while building
// a batch sees it: its renewals of the batch's lease never arrive (those of
// a paused process are never sent).
type cutOff struct{ *redisbroker.Broker }

func (cutOff) ExtendBatch(context.Context, *brokers.Batch) error {
	return errors.New("connection refused")
}

// countRenewals is the memory broker counting the batch renewals it
// granted.
type countRenewals struct {
	*redisbroker.Broker
	renewed chan struct{}
}

func (c countRenewals) ExtendBatch(ctx context.Context, b *brokers.Batch) error {
	err := c.Broker.ExtendBatch(ctx, b)
	if err == nil {
		select {
		case c.renewed <- struct{}{}:
		default:
		}
	}
	return err
}

// An aggregator may run longer than the batch's lease (here two): the heartbeat
// renews it, as a running task's, so no other worker takes the batch
// meanwhile, and the aggregate is published once.
func TestAggregatorLongerThanTheLease(t *testing.T) {
	t.Parallel()
	const lease, renew = time.Second, 100 * time.Millisecond // ten renewals to lose before the lease ends
	h := newHarness(t, &config.Config{
		LeaseDuration: lease, LeaseRenewInterval: renew, RecoverInterval: 50 * time.Millisecond,
		Redis: &config.RedisConfig{NormalTasksPollPeriod: 20},
	})
	h.reg["digest"] = func(n int64) (int64, error) { return n, nil }
	broker := countRenewals{Broker: h.mem, renewed: make(chan struct{})}
	var calls atomic.Int32
	reg := aggRegistry{registry: h.reg, aggs: map[string]Aggregation{"member": {
		Policy: brokers.AggregationPolicy{MaxSize: 2},
		Func: func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			calls.Add(1)
			// Two leases' worth of renewals (each renew apart), the
			// context alive throughout.
			for range 2 * lease / renew {
				select {
				case <-broker.renewed:
				case <-ctx.Done():
					return nil, fmt.Errorf("aggregator stopped: %w", context.Cause(ctx))
				}
			}
			return &tasks.Signature{Name: "digest", Args: []tasks.Arg{{Type: "int64", Value: int64(len(members))}}}, nil
		},
	}}}
	for _, name := range []string{"a", "b"} { // b would take the batch were its lease to end
		p := h.params()
		p.ConsumerTag = name
		p.Broker = broker
		p.Tasks = reg
		h.startStarted(p)
	}
	members := h.publishMembers("k", 2)
	waitFor(t, "the aggregate to succeed", func() bool {
		st := h.stateOf(members[0].UUID)
		return st != nil && st.Aggregate != "" && h.state(st.Aggregate) == tasks.StateSuccess
	})
	if n := calls.Load(); n != 1 {
		t.Errorf("aggregator called %d times, want 1: the batch was taken again while its aggregator ran", n)
	}
	if errs := h.errs.all(); len(errs) > 0 {
		t.Errorf("errors reported: %v", errs)
	}
}

// A worker builds up to Concurrency batches at once: here two aggregator
// calls, each waiting for the other to begin.
func TestBatchesBuiltConcurrently(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{Redis: &config.RedisConfig{NormalTasksPollPeriod: 20}})
	h.reg["digest"] = func(n int64) (int64, error) { return n, nil }
	in := make(chan string, 2)
	both := make(chan struct{})
	var once sync.Once
	reg := aggRegistry{registry: h.reg, aggs: map[string]Aggregation{"member": {
		Policy: brokers.AggregationPolicy{MaxSize: 2},
		Func: func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			in <- key
			if len(in) == 2 {
				once.Do(func() { close(both) })
			}
			select {
			case <-both:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &tasks.Signature{Name: "digest", Args: []tasks.Arg{{Type: "int64", Value: int64(len(members))}}}, nil
		},
	}}}
	p := h.params()
	p.Broker = h.mem // the spy hides the broker's aggregation
	p.Tasks = reg
	p.Concurrency = 2
	h.startStarted(p)
	a, b := h.publishMembers("a", 2), h.publishMembers("b", 2)
	recv(t, both, "two aggregator calls at once")
	waitFor(t, "both aggregates to succeed", func() bool {
		for _, m := range []*tasks.Signature{a[0], b[0]} {
			st := h.stateOf(m.UUID)
			if st == nil || st.Aggregate == "" || h.state(st.Aggregate) != tasks.StateSuccess {
				return false
			}
		}
		return true
	})
}

// fetchStops is the memory broker telling when a Fetch returned because
// its worker is stopping.
type fetchStops struct {
	*redisbroker.Broker
	once    sync.Once
	stopped chan struct{}
}

func (f *fetchStops) Fetch(ctx context.Context, queues []string, max int, names *brokers.TaskNames) ([]*brokers.Delivery, error) {
	ds, err := f.Broker.Fetch(ctx, queues, max, names)
	if ctx.Err() != nil {
		f.once.Do(func() { close(f.stopped) })
	}
	return ds, err
}

// A stopping worker lets the batch it is building finish, as it lets its
// running tasks finish: the aggregate is published once, the batch not
// given up to be built again.
func TestStoppingWorkerFinishesItsBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{Redis: &config.RedisConfig{NormalTasksPollPeriod: 20}})
	broker := &fetchStops{Broker: h.mem, stopped: make(chan struct{})}
	in, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	reg := aggRegistry{registry: h.reg, aggs: map[string]Aggregation{"member": {
		Policy: brokers.AggregationPolicy{MaxSize: 2},
		Func: func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			calls.Add(1)
			close(in)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, fmt.Errorf("aggregator stopped: %w", ctx.Err())
			}
			return &tasks.Signature{Name: "digest"}, nil
		},
	}}}
	p := h.params()
	p.Broker = broker
	p.Tasks = reg
	r := h.startStarted(p)
	members := h.publishMembers("k", 2)
	recv(t, in, "the aggregator's call")
	r.cancel() // a graceful stop
	recv(t, broker.stopped, "fetching to stop")
	close(release)
	if err := r.wait(t); err != nil {
		t.Fatalf("the worker's Run: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("aggregator called %d times, want 1", n)
	}
	st := h.stateOf(members[0].UUID)
	if st == nil || st.Aggregate == "" {
		t.Fatalf("member's state %+v, want it to name its aggregate", st)
	}
	info, err := h.mem.QueueInfo(context.Background(), testQueue)
	if err != nil || info.Pending != 1 || info.Aggregating != 0 {
		t.Fatalf("queue after the stop: %+v, %v; want the aggregate pending and no member held", info, err)
	}
}

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
	worker := func(name string) {
		p := h.params()
		p.Broker = h.mem // the spy hides the broker's aggregation
		if name == "a" {
			p.Broker = cutOff{h.mem} // its lease ends while it is paused
		}
		p.Tasks = reg
		p.AggregationStepFunc = func(step string) { steps[name] <- step }
		h.startStarted(p)
	}
	worker("a")
	members := h.publishMembers("k", 2)
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

// membersFailWith starts a worker of cnf (with AggregatorRetries 1) whose
// aggregator of "member" (batches of 2) is fn, sends a batch's members,
// waits for them to fail, and checks that fn was called twice and that the
// members' error names want and the 2 failures. It returns the harness.
func membersFailWith(t *testing.T, cnf *config.Config, want string, fn func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error)) *harness {
	t.Helper()
	cnf.AggregatorRetries = 1
	cnf.Redis = &config.RedisConfig{NormalTasksPollPeriod: 20}
	h := newHarness(t, cnf)
	var calls atomic.Int32
	reg := aggRegistry{registry: h.reg, aggs: map[string]Aggregation{"member": {
		Policy: brokers.AggregationPolicy{MaxSize: 2},
		Func: func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			calls.Add(1)
			return fn(ctx, key, members)
		},
	}}}
	p := h.params()
	p.Broker = h.mem // the spy hides the broker's aggregation
	p.Tasks = reg
	h.startStarted(p)
	members := h.publishMembers("k", 2)
	waitFor(t, "the members to fail", func() bool {
		return h.state(members[0].UUID) == tasks.StateFailure && h.state(members[1].UUID) == tasks.StateFailure
	})
	if n := calls.Load(); n != 2 {
		t.Errorf("aggregator called %d times, want 2 (AggregatorRetries 1)", n)
	}
	st := h.stateOf(members[0].UUID)
	if !strings.Contains(st.Error, want) || !strings.Contains(st.Error, "failed 2 times") {
		t.Errorf("member's error %q, want it to name %s and the 2 failures", st.Error, want)
	}
	return h
}

// An aggregator that returns a member (a task with an AggregationKey) as
// its aggregate fails like one that returns an error: its batch is tried
// again, then its members are archived, their states FAILURE saying why.
func TestAggregateWithAnAggregationKeyFailsItsMembers(t *testing.T) {
	t.Parallel()
	h := membersFailWith(t, &config.Config{}, "AggregationKey",
		func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			return &tasks.Signature{Name: "member", AggregationKey: key}, nil
		})
	// The worker writes a FAILURE state and archives the task in two steps
	// (its backend is not the broker's): the second may still be on its way.
	waitFor(t, "the 2 members to be archived", func() bool {
		infos, err := h.mem.ListTasks(context.Background(), testQueue, brokers.StatusArchived, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(infos) == 2
	})
}

// An aggregator that never returns (here it ignores its context too) is
// given up on after AggregatorTimeout: its batch fails, is tried again,
// and then its members are archived, their states FAILURE saying why;
// they are not held for as long as the call hangs.
func TestAggregatorPastItsTimeoutFailsItsBatch(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	membersFailWith(t, &config.Config{AggregatorTimeout: 50 * time.Millisecond}, "AggregatorTimeout",
		func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			<-hang
			return &tasks.Signature{Name: "digest"}, nil
		})
}

// A batch whose worker died or hung while building it more than
// MaxRecoveries times is archived, its members FAILURE, rather than handed
// to the aggregator again.
func TestBatchLostPastMaxRecoveriesIsArchived(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{
		LeaseDuration: time.Second, RecoverInterval: 50 * time.Millisecond, MaxRecoveries: 1,
		Redis: &config.RedisConfig{NormalTasksPollPeriod: 20},
	})
	var calls atomic.Int32
	in := make(chan struct{}, 2)
	release := make(chan struct{})
	defer close(release)
	reg := aggRegistry{registry: h.reg, aggs: map[string]Aggregation{"member": {
		Policy: brokers.AggregationPolicy{MaxSize: 2},
		Func: func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			calls.Add(1)
			in <- struct{}{}
			<-release // hung: it ignores its context past the lease
			return &tasks.Signature{Name: "digest"}, nil
		},
	}}}
	// The first two workers' processes stop (their renewals never arrive)
	// while in the aggregator.
	start := func(broker brokers.LeaseBroker) {
		p := h.params()
		p.Broker = broker // the spy hides the broker's aggregation
		p.Tasks = reg
		h.startStarted(p)
	}
	start(cutOff{h.mem})
	members := h.publishMembers("k", 2)
	recv(t, in, "the first worker to call the aggregator")
	// The second takes the batch once the first's lease ends (recovered
	// once: within MaxRecoveries) and hangs too; the third finds it
	// recovered twice and archives it.
	start(cutOff{h.mem})
	recv(t, in, "the second worker to call the aggregator")
	start(h.mem)
	waitFor(t, "the members to fail", func() bool {
		return h.state(members[0].UUID) == tasks.StateFailure && h.state(members[1].UUID) == tasks.StateFailure
	})
	if n := calls.Load(); n != 2 {
		t.Errorf("aggregator called %d times, want 2: the batch past MaxRecoveries is archived, not built again", n)
	}
	if st := h.stateOf(members[0].UUID); !strings.Contains(st.Error, "MaxRecoveries") {
		t.Errorf("member's error %q, want it to name MaxRecoveries", st.Error)
	}
}

// Members whose aggregator is gone (no worker alive announces it) are not
// left waiting: once their group is due, the broker hands them out as plain
// tasks; a worker without the aggregator tries each again (it rejoins its
// group: an aggregator may be starting), then fails it saying why.
func TestMembersWithoutAnAggregatorFail(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{
		LeaseDuration: time.Second, RecoverInterval: 50 * time.Millisecond,
		UnregisteredTaskTries: 2, UnregisteredTaskDelay: 10 * time.Millisecond,
		Redis: &config.RedisConfig{NormalTasksPollPeriod: 20},
	})
	var calls atomic.Int32
	reg := aggRegistry{registry: h.reg, aggs: map[string]Aggregation{"member": {
		Policy: brokers.AggregationPolicy{MaxSize: 10, MaxDelay: 100 * time.Millisecond},
		Func: func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			calls.Add(1)
			return &tasks.Signature{Name: "digest"}, nil
		},
	}}}
	// The aggregating worker announces, then stops before any group is due.
	p := h.params()
	p.Broker = h.mem // the spy hides the broker's aggregation
	p.Tasks = reg
	aggregator := h.startStarted(p)
	if err := aggregator.stop(t); err != nil {
		t.Fatalf("stopping the aggregating worker: %v", err)
	}
	members := h.publishMembers("k", 2) // the announcement lives on for LeaseDuration
	h.start(h.params())                 // a worker of other tasks
	waitFor(t, "the members to fail", func() bool {
		return h.state(members[0].UUID) == tasks.StateFailure && h.state(members[1].UUID) == tasks.StateFailure
	})
	if n := calls.Load(); n != 0 {
		t.Errorf("aggregator called %d times after its worker stopped", n)
	}
	st := h.stateOf(members[0].UUID)
	if !strings.Contains(st.Error, `no worker alive aggregates task "member"`) || !strings.Contains(st.Error, "2 tries") {
		t.Errorf("member's error %q, want it to say no worker aggregates it, after 2 tries", st.Error)
	}
	if rc := h.spy.retryCalls(); len(rc) != 2 {
		t.Errorf("%d retries, want one per member before it failed", len(rc))
	}
	// A member's FAILURE is written before it is archived: wait for both.
	waitFor(t, "the 2 members archived", func() bool {
		infos, err := h.mem.ListTasks(context.Background(), testQueue, brokers.StatusArchived, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(infos) == 2
	})
}

// A stop waits ShutdownTimeout at most for the batches being built and the
// running tasks together: an aggregator and a task that both outlast it
// are given up on when it has passed once, not once for each.
func TestShutdownTimeoutBoundsBatchesAndTasksTogether(t *testing.T) {
	t.Parallel()
	const timeout = time.Hour // on the fake clock
	h := newHarness(t, &config.Config{ShutdownTimeout: timeout})
	clk := clock.NewFake(time.Now())
	building, running := make(chan struct{}), make(chan struct{})
	reg := aggRegistry{registry: h.reg, aggs: map[string]Aggregation{"member": {
		Policy: brokers.AggregationPolicy{MaxSize: 2},
		Func: func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			close(building)
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}}}
	h.reg["hold"] = func(ctx context.Context) error {
		close(running)
		<-ctx.Done()
		return ctx.Err()
	}
	p := h.params()
	p.Broker = h.mem // an aggregator
	p.Tasks = reg
	p.Clock = clk
	p.Concurrency = 2
	r := h.startStarted(p)
	h.publishMembers("k", 2)
	recv(t, building, "the aggregator's call")
	h.publish(newSig("hold"))
	recv(t, running, "the task to start")
	armed := clk.Armed()
	r.cancel() // a graceful stop: Run arms the shutdown timer
	clk.BlockUntil(armed + 1)
	clk.Advance(timeout)
	if err := r.wait(t); err != nil {
		t.Fatalf("the worker's Run: %v", err)
	}
}
