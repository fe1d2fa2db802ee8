package chaos_test

// Aggregation under crashes: a worker process that aggregates is killed
// with SIGKILL at each step of a batch (claimed, built, states written,
// completed), and ten processes aggregate one key while one of them is
// killed every 300 ms. Whatever happens, each member ends in exactly one
// aggregate that runs to SUCCESS, and no aggregate is published twice: the
// members-to-aggregate mapping is a partition, and an aggregate runs again
// only as any task does, when the worker that ran it died before settling
// it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
	"github.com/b6192125/machinist/v1/worker"
)

const (
	// memberTask is the members' task name, aggregateTask the aggregates'.
	// An aggregate receives its members' UUIDs, records its run on the
	// witness ("run"), works aggregateWork and returns them joined by ",";
	// each member's result is its aggregate's, so it names the member.
	memberTask    = "chaos.member"
	aggregateTask = "chaos.aggregate"
	aggregateWork = 20 * time.Millisecond
	// buildWork is how long the aggregator takes, after it records its
	// call ("build"): a kill then can land between the build and the
	// completion of a batch.
	buildWork = 30 * time.Millisecond

	// aggregatorEnv, when set to "<witness url>|<witness key>|<who>|<max
	// size>|<grace period>|<kill step>|<aggregates queue>", turns the test
	// binary into an aggregating worker process (startAggregator) that
	// kills itself with SIGKILL after its first <kill step> ("" never).
	// Its configuration comes from the environment, as childEnv's.
	aggregatorEnv = "MACHINIST_CHAOS_AGGREGATOR"

	// aggregatesQueue is where TestAggregationKilledAtEachStep's
	// aggregates go: a queue the killed process does not consume, so that
	// it never runs one and each must run exactly once.
	aggregatesQueue = "chaos_aggregates"
)

// The aggregating worker process is dispatched here rather than in
// TestMain: it needs the worker engine's AggregationStepFunc, which
// machinist's Worker does not expose, and this keeps it in this file.
func init() {
	if spec := os.Getenv(aggregatorEnv); spec != "" {
		runAggregator(spec) // never returns
	}
}

// TestAggregationKilledAtEachStep kills the process that aggregates a
// batch of 5 members with SIGKILL right after each step of its protocol;
// another worker finishes: every member resolves, all 5 are in one
// aggregate, which ran once.
func TestAggregationKilledAtEachStep(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"claimed", "built", "states", "completed"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			repeat(t, func(round int) { aggregationKilledAt(t, step) })
		})
	}
}

func aggregationKilledAt(t *testing.T, step string) {
	const members = 5
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	srv := redistest.Start(t)
	w := newAggWitness(t)
	policy := machinery.AggregationPolicy{MaxSize: members}
	a := w.startAggregator(t, "A", policy, step, aggregatesQueue, aggregatorConfig(srv.URL())...)
	s := w.newServer(t, srv.URL(), "B", policy, aggregatesQueue)

	results := sendMembers(t, ctx, s, members, 0)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("worker process A did not kill itself at %q within 30 s of its %d members", step, members)
	}
	killedAt := time.Now()
	if !killedBySIGKILL(a.err) {
		t.Fatalf("worker process A exited with %v, want killed by SIGKILL at %q", a.err, step)
	}
	if got := w.read(t, ctx).steps; !slices.Equal(got, []string{"A:" + step}) {
		t.Fatalf("worker process A recorded steps %v before it died, want [A:%s]", got, step)
	}

	b := s.NewQueuesWorker("B", 4, map[string]int{s.GetConfig().DefaultQueue: 1, aggregatesQueue: 1}, false)
	launchWorker(t, b)
	rep := w.verify(t, ctx, s, results, nil)
	if rep.aggregates != 1 || rep.runs != 1 {
		t.Errorf("%d members made %d aggregates run %d times, want 1 aggregate run once", members, rep.aggregates, rep.runs)
	}
	t.Logf("killed after %q: %v; all done %v after the kill", step, rep, rep.finished.Sub(killedAt).Round(10*time.Millisecond))
}

// TestAggregationTenProcessesOneKey runs 10 aggregating worker processes,
// sends 500 members of one key from 5 goroutines, and meanwhile kills one
// process every 300 ms with SIGKILL and starts another. Every member is
// in exactly one aggregate; an aggregate runs more than once only after
// the process that ran it was killed.
func TestAggregationTenProcessesOneKey(t *testing.T) {
	t.Parallel()
	repeat(t, func(round int) { tenProcessesOneKey(t) })
}

func tenProcessesOneKey(t *testing.T) {
	const (
		processes = 10
		senders   = 5
		perSender = 100
		sendEvery = 30 * time.Millisecond // 500 members in about 3 s
		killEvery = 300 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	srv := redistest.Start(t)
	w := newAggWitness(t)
	policy := machinery.AggregationPolicy{MaxSize: 10, GracePeriod: 200 * time.Millisecond}
	cnf := aggregatorConfig(srv.URL())
	var alive []*process
	started := 0
	start := func() {
		started++
		alive = append(alive, w.startAggregator(t, fmt.Sprintf("P%02d", started), policy, "", "", cnf...))
	}
	for range processes {
		start()
	}
	s := w.newServer(t, srv.URL(), "sender", policy, "")

	// The first send waits for an announcement; then the senders.
	results := sendMembers(t, ctx, s, 1, 0)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := sendMembers(t, ctx, s, perSender, sendEvery)
			mu.Lock()
			results = append(results, rs...)
			mu.Unlock()
		}()
	}
	sending := make(chan struct{})
	go func() { wg.Wait(); close(sending) }()

	// Kill one process every killEvery while the members are sent, and
	// start another: every other time the one that last began building a
	// batch (it may still be at it), else one at random.
	killed := map[string]time.Time{}
	tick := time.NewTicker(killEvery)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-sending:
			done = true
		case <-tick.C:
			i := mathrand.IntN(len(alive))
			if len(killed)%2 == 0 {
				if j := slices.IndexFunc(alive, func(p *process) bool { return p.who == w.lastBuilder(t, ctx) }); j >= 0 {
					i = j
				}
			}
			p := alive[i]
			p.Kill(t)
			killed[p.who] = time.Now()
			alive = slices.Delete(alive, i, i+1)
			start()
		}
	}
	killsEnded := time.Now()
	if t.Failed() {
		t.FailNow()
	}
	if len(killed) == 0 {
		t.Fatal("no process was killed while the members were sent: the test tested nothing")
	}
	rep := w.verify(t, ctx, s, results, killed)
	if rep.members != 1+senders*perSender {
		t.Errorf("%d members verified, want %d", rep.members, 1+senders*perSender)
	}
	t.Logf("%d processes, %d killed (one every %v) while %d members were sent over %v: %v; all done %v after the kills ended",
		processes, len(killed), killEvery, rep.members, time.Duration(perSender)*sendEvery, rep,
		max(rep.finished.Sub(killsEnded), 0).Round(10*time.Millisecond))
}

// aggregatorConfig is the environment of an aggregating process on the
// Redis at url: short leases, so that a killed process's batch is taken
// again within seconds, and a short poll, so that a worker whose wake-up
// went to a process killed meanwhile looks again soon.
func aggregatorConfig(url string) []string {
	return []string{"BROKER=" + url, "RESULT_BACKEND=" + url, "LEASE_DURATION=" + shortLease.String(), "REDIS_NORMAL_TASKS_POLL_PERIOD=50"}
}

// sendMembers sends n members of one key with s, every interval, and
// returns their results. A member refused with ErrNoAggregator (not
// sent: no worker has announced yet, or every announcement lapsed, the
// processes that made them killed or, on a loaded machine, late to renew
// them) is sent again, as a sender would.
func sendMembers(t *testing.T, ctx context.Context, s *machinery.Server, n int, interval time.Duration) []*result.AsyncResult {
	t.Helper()
	var out []*result.AsyncResult
	for i := range n {
		if i > 0 && interval > 0 {
			select {
			case <-ctx.Done():
				t.Error(ctx.Err())
				return out
			case <-time.After(interval):
			}
		}
		for {
			r, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: memberTask, AggregationKey: "one-key"})
			if errors.Is(err, brokers.ErrNoAggregator) && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond) // polling for an announcement
				continue
			}
			if err != nil {
				t.Errorf("send member %d: %v", i, err)
				return out
			}
			out = append(out, r)
			break
		}
	}
	return out
}

// killedBySIGKILL reports whether err, a process's Wait error, says it was
// killed by SIGKILL.
func killedBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// launchWorker runs w in this process until the test ends.
func launchWorker(t *testing.T, w *machinery.Worker) {
	t.Helper()
	w.SetErrorHandler(func(error) {})
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	t.Cleanup(func() {
		w.Quit()
		if err := <-errs; err != nil && !errors.Is(err, machinery.ErrWorkerQuitGracefully) {
			t.Errorf("worker stopped with %v", err)
		}
	})
	<-w.Started()
}

// aggWitness is the witness of the aggregation tests: a list, on a Redis
// no fault touches, of every aggregator call ("build"), aggregate run
// ("run") and step a process killed itself at ("step").
type aggWitness struct {
	client *goredis.Client
	key    string
}

func newAggWitness(t *testing.T) *aggWitness {
	t.Helper()
	srv := redistest.Shared(t)
	return &aggWitness{client: srv.Client(t), key: srv.Prefix(t) + "aggregation"}
}

// newServer returns a Server on the Redis at url that aggregates memberTask
// with policy and runs aggregateTask, recording as who; it is closed when
// the test ends.
func (w *aggWitness) newServer(t *testing.T, url, who string, policy machinery.AggregationPolicy, queue string) *machinery.Server {
	t.Helper()
	s, err := machinery.NewServer(&config.Config{
		Broker:        url,
		ResultBackend: url,
		NoUnixSignals: true,
		LeaseDuration: shortLease,
		Redis:         &config.RedisConfig{NormalTasksPollPeriod: 50},
		Logger:        slog.New(slog.NewTextHandler(logFile(t, who+".log"), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := registerAggregation(s, w.client, w.key, who, policy, queue); err != nil {
		t.Fatal(err)
	}
	return s
}

// registerAggregation registers on s the aggregator of memberTask, with
// policy, whose aggregates go to queue ("": the members'), and
// aggregateTask; both record on the witness list key as who.
func registerAggregation(s *machinery.Server, witness goredis.UniversalClient, key, who string, policy machinery.AggregationPolicy, queue string) error {
	if err := s.RegisterTask(aggregateTask, func(ctx context.Context, members []string) (string, error) {
		joined := strings.Join(members, ",")
		if err := record(ctx, witness, key, "run", who, tasks.SignatureFromContext(ctx).UUID, joined); err != nil {
			return "", err
		}
		time.Sleep(aggregateWork)
		return joined, nil
	}); err != nil {
		return err
	}
	return s.RegisterAggregator(memberTask, policy, func(ctx context.Context, _ string, members []*tasks.Signature) (*tasks.Signature, error) {
		ids := make([]string, len(members))
		for i, m := range members {
			ids[i] = m.UUID
		}
		if err := record(ctx, witness, key, "build", who, "", strings.Join(ids, ",")); err != nil {
			return nil, err
		}
		time.Sleep(buildWork)
		return &tasks.Signature{Name: aggregateTask, RoutingKey: queue, Args: []tasks.Arg{{Type: "[]string", Value: ids}}}, nil
	})
}

// record appends "kind|who|id|members|ms" to the witness list key.
func record(ctx context.Context, witness goredis.UniversalClient, key, kind, who, id, members string) error {
	entry := strings.Join([]string{kind, who, id, members, strconv.FormatInt(time.Now().UnixMilli(), 10)}, "|")
	return witness.RPush(context.WithoutCancel(ctx), key, entry).Err()
}

// startAggregator starts an aggregating worker process named who (see
// aggregatorEnv) with env; it is killed when the test ends.
func (w *aggWitness) startAggregator(t *testing.T, who string, policy machinery.AggregationPolicy, killAt, queue string, env ...string) *process {
	t.Helper()
	spec := strings.Join([]string{"redis://" + w.client.Options().Addr, w.key, who,
		strconv.Itoa(policy.MaxSize), policy.GracePeriod.String(), killAt, queue}, "|")
	return spawn(t, who, append([]string{aggregatorEnv + "=" + spec}, env...)...)
}

// runAggregator runs an aggregating worker process for spec (see
// aggregatorEnv) until SIGTERM or SIGINT, then exits; or kills itself at
// its kill step. It builds the worker engine itself, for its
// AggregationStepFunc.
func runAggregator(spec string) {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "chaos aggregator: "+format+"\n", args...)
		os.Exit(2)
	}
	f := strings.Split(spec, "|")
	if len(f) != 7 {
		fail("%s=%q: want 7 fields", aggregatorEnv, spec)
	}
	witnessURL, key, who, killAt, queue := f[0], f[1], f[2], f[5], f[6]
	var policy machinery.AggregationPolicy
	var err error
	if policy.MaxSize, err = strconv.Atoi(f[3]); err != nil {
		fail("max size: %v", err)
	}
	if policy.GracePeriod, err = time.ParseDuration(f[4]); err != nil {
		fail("grace period: %v", err)
	}
	cnf, err := config.NewFromEnvironment()
	if err != nil {
		fail("config: %v", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cnf.Logger = log
	s, err := machinery.NewServer(cnf)
	if err != nil {
		fail("NewServer: %v", err)
	}
	opts, err := goredis.ParseURL(witnessURL)
	if err != nil {
		fail("witness %s: %v", witnessURL, err)
	}
	witness := goredis.NewClient(opts)
	if err := registerAggregation(s, witness, key, who, policy, queue); err != nil {
		fail("register: %v", err)
	}
	engine := worker.New(worker.Params{
		Broker:  s.GetBroker(),
		Backend: s.GetBackend(),
		Config:  s.GetConfig(),
		Logger:  log,
		Tasks:   s,
		SendFunc: func(ctx context.Context, sig *tasks.Signature) error {
			if _, err := s.SendTaskWithContext(ctx, sig); err != nil && !errors.Is(err, brokers.ErrDuplicateTask) {
				return err
			}
			return nil
		},
		ConsumerTag:      who,
		Concurrency:      4,
		Queues:           []string{s.GetConfig().DefaultQueue},
		ErrorHandlerFunc: func(error) {},
		AggregationStepFunc: func(step string) {
			if step != killAt {
				return
			}
			if err := record(context.Background(), witness, key, "step", who, step, ""); err != nil {
				fail("record the step: %v", err)
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		},
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := engine.Run(ctx); err != nil {
		fail("worker stopped: %v", err)
	}
	os.Exit(0)
}

// lastBuilder returns the process that last began building a batch, or "".
func (w *aggWitness) lastBuilder(t *testing.T, ctx context.Context) string {
	t.Helper()
	entries, err := w.client.LRange(ctx, w.key, -20, -1).Result()
	if err != nil {
		t.Fatalf("read the witness: %v", err)
	}
	for _, e := range slices.Backward(entries) {
		if kind, rest, _ := strings.Cut(e, "|"); kind == "build" {
			who, _, _ := strings.Cut(rest, "|")
			return who
		}
	}
	return ""
}

// aggRun is one run of an aggregate, from the witness.
type aggRun struct {
	who string
	at  time.Time
}

// aggWitnessed is what the witness holds.
type aggWitnessed struct {
	runs    map[string][]aggRun // by aggregate UUID, in order
	members map[string]string   // the members an aggregate received, joined, by aggregate UUID
	builds  map[string]int      // aggregator calls, by the members given, joined
	steps   []string            // "who:step" a process killed itself at
	last    time.Time           // of the last run
}

func (w *aggWitness) read(t *testing.T, ctx context.Context) *aggWitnessed {
	t.Helper()
	entries, err := w.client.LRange(context.WithoutCancel(ctx), w.key, 0, -1).Result()
	if err != nil {
		t.Fatalf("read the witness: %v", err)
	}
	out := &aggWitnessed{runs: map[string][]aggRun{}, members: map[string]string{}, builds: map[string]int{}}
	for _, e := range entries {
		f := strings.Split(e, "|")
		if len(f) != 5 {
			t.Fatalf("malformed witness entry %q", e)
		}
		ms, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			t.Fatalf("malformed witness entry %q", e)
		}
		kind, who, id, members, at := f[0], f[1], f[2], f[3], time.UnixMilli(ms)
		switch kind {
		case "run":
			if prev, ok := out.members[id]; ok && prev != members {
				t.Errorf("aggregate %s ran with members %s, then with %s", id, prev, members)
			}
			out.members[id] = members
			out.runs[id] = append(out.runs[id], aggRun{who: who, at: at})
			if at.After(out.last) {
				out.last = at
			}
		case "build":
			out.builds[members]++
		case "step":
			out.steps = append(out.steps, who+":"+id)
		default:
			t.Fatalf("malformed witness entry %q", e)
		}
	}
	return out
}

// aggReport is what verify found.
type aggReport struct {
	members, aggregates int
	runs, reruns        int // runs of aggregates; of them, runs beyond one per aggregate
	builds, rebuilds    int // aggregator calls; of them, of a batch built before
	finished            time.Time
}

func (r aggReport) String() string {
	return fmt.Sprintf("%d members in %d aggregates, %d runs (%d beyond one per aggregate), aggregator called %d times (%d on a batch built before)",
		r.members, r.aggregates, r.runs, r.reruns, r.builds, r.rebuilds)
}

// verify waits (until ctx ends) for every member's result, and a lease
// more, then checks that the aggregates the witness saw partition the members, each member's
// result naming it, each aggregate's state SUCCESS; and that an aggregate
// ran more than once only when each run but the last was in a process
// killed (the times in killed) after that run began, the next run
// beginning after that kill.
func (w *aggWitness) verify(t *testing.T, ctx context.Context, s *machinery.Server, results []*result.AsyncResult, killed map[string]time.Time) aggReport {
	t.Helper()
	var rep aggReport
	backend := s.GetBackend().(backends.ContextBackend)
	lost := 0
	for _, r := range results {
		rep.members++
		out, err := r.GetWithContext(ctx, 20*time.Millisecond)
		if err == nil && (len(out) != 1 || !slices.Contains(strings.Split(out[0].String(), ","), r.Signature.UUID)) {
			err = fmt.Errorf("its result %v does not name it", out)
		}
		if err != nil {
			if lost++; lost <= 5 {
				t.Errorf("member %s: %v", r.Signature.UUID, err)
			}
		}
	}
	if lost > 5 {
		t.Errorf("… %d of %d members did not resolve", lost, len(results))
	}

	// Then a lease and a second more, for what must not happen: a batch
	// left behind is taken again when its lease ends, and its aggregate
	// published again. (An absence has no signal to wait on.)
	select {
	case <-time.After(shortLease + time.Second):
	case <-ctx.Done():
	}
	seen := w.read(t, ctx)
	rep.finished = seen.last
	for _, n := range seen.builds {
		rep.builds += n
		rep.rebuilds += n - 1
	}
	sent := make(map[string]bool, len(results))
	for _, r := range results {
		sent[r.Signature.UUID] = true
	}
	in := map[string][]string{} // member → aggregates
	violations := 0
	violate := func(format string, args ...any) {
		if violations++; violations <= 10 {
			t.Errorf(format, args...)
		}
	}
	for id, members := range seen.members {
		rep.aggregates++
		for _, m := range strings.Split(members, ",") {
			if !sent[m] {
				violate("aggregate %s ran with %s, which was not sent", id, m)
			}
			in[m] = append(in[m], id)
		}
		runs := seen.runs[id]
		rep.runs += len(runs)
		rep.reruns += len(runs) - 1
		for i, r := range runs[:len(runs)-1] {
			at, ok := killed[r.who]
			if !ok || at.Before(r.at) || runs[i+1].at.Before(at) {
				violate("aggregate %s ran %d times (%v), but run %d, in %s, was not cut short by a kill of %s (killed: %v)",
					id, len(runs), runs, i+1, r.who, r.who, ok)
			}
		}
		st, err := backend.GetStateContext(context.WithoutCancel(ctx), id)
		switch {
		case err != nil:
			violate("aggregate %s: %v", id, err)
		case st.State != tasks.StateSuccess:
			violate("aggregate %s is %s (%q), want SUCCESS", id, st.State, st.Error)
		}
	}
	for m := range sent {
		if n := len(in[m]); n != 1 {
			violate("member %s is in %d aggregates %v, want 1", m, n, in[m])
		}
	}
	if violations > 10 {
		t.Errorf("… %d violations in all", violations)
	}
	return rep
}
