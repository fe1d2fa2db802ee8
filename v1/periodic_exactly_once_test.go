package machinery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/periodic"
	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/redistest"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/tasks"
)

// These tests run several Servers on one broker and backend, as several
// processes share them, each scheduler on a fake clock of its own, and
// check with a worker that each tick's task runs once: a tick sent twice
// would run twice, since the first copy has left the broker by then.
// Nothing sleeps to wait for something: the tests move the clocks and wait
// on the schedulers' hooks, the worker's runs and the queue's sizes. On
// Redis, whose claims run on Redis's own clock, a lease is made short and
// its end waited for: time has to pass there.

// proc is a Server standing for a process: its scheduler on a fake clock,
// the steps of its attempts at ticks reported, and a step at which it dies.
type proc struct {
	s     *Server
	clk   *clock.Fake
	steps chan procStep
	// dieAt is the step (a periodic.Step) at which the process "dies": the
	// attempt ends there, writing nothing more and looking at the tick no
	// more; -1 for never.
	dieAt atomic.Int32
}

type procStep struct {
	step periodic.Step
	t    periodic.Tick
	died bool
}

// newProc makes s a proc whose scheduler starts at start, with lease (0 for
// the config's LeaseDuration).
func newProc(s *Server, start time.Time, lease time.Duration) *proc {
	p := &proc{s: s, clk: clock.NewFake(start), steps: make(chan procStep, 1000)}
	p.dieAt.Store(-1)
	schedule(s, p.clk, lease, func(step periodic.Step, t periodic.Tick) bool {
		died := step != periodic.StepEnded && periodic.Step(p.dieAt.Load()) == step
		select {
		case p.steps <- procStep{step: step, t: t, died: died}:
		default: // a test that lets this many pile up fails waiting for one
		}
		return !died
	})
	return p
}

// tried is what an attempt at a tick did.
type tried struct {
	claimed, sent, died bool
}

// attemptAt waits for p's next attempt at tick at to end, and reports what
// it did.
func (p *proc) attemptAt(t *testing.T, at time.Time) tried {
	t.Helper()
	var a tried
	for {
		st := next(t, p.steps)
		if !st.t.At.Equal(at) {
			continue // an attempt at another tick
		}
		a.claimed = a.claimed || st.step == periodic.StepClaimed
		a.sent = a.sent || st.step == periodic.StepSent
		a.died = a.died || st.died
		if a.died || st.step == periodic.StepEnded {
			return a
		}
	}
}

// set moves p's clock to at, once its scheduler waits.
func (p *proc) set(t *testing.T, at time.Time) {
	t.Helper()
	waitArmed(t, p.clk)
	p.clk.Set(at)
}

// tickUUID is the UUID of the task that RegisterPeriodicTask(spec, name)
// sends for its tick at.
func tickUUID(name, spec string, at time.Time) string {
	return periodic.Tick{Key: fmt.Sprintf("periodic:%s:%s:%d", name, spec, at.Unix())}.UUID("task_", "/0")
}

// ran is what a reporting worker ran: task UUIDs, and the results a
// callback received.
type ran struct {
	uuid string
	sum  int64
}

// startWorker registers on s the tasks "report" (reports its UUID), "part"
// (returns its argument) and "sum" (a chord callback that adds the
// results), runs a worker on it until the test ends, and returns what it
// runs.
func startWorker(t *testing.T, s *Server) <-chan ran {
	t.Helper()
	runs := make(chan ran, 100)
	report := func(ctx context.Context, sum int64) {
		runs <- ran{uuid: tasks.SignatureFromContext(ctx).UUID, sum: sum}
	}
	err := s.RegisterTasks(map[string]interface{}{
		"report": func(ctx context.Context) error { report(ctx, 0); return nil },
		"part":   func(ctx context.Context, n int64) (int64, error) { report(ctx, 0); return n, nil },
		"sum": func(ctx context.Context, a, b, c, d int64) error {
			report(ctx, a+b+c+d)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := s.NewWorker("periodic-test", 2)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	t.Cleanup(func() {
		w.Quit()
		if err := <-errs; err != nil {
			t.Error(err)
		}
	})
	return runs
}

// waitIdle waits until s's default queue holds no task: what was sent has
// run and left the broker.
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	insp := s.GetBroker().(brokers.Inspector)
	queue := s.GetConfig().DefaultQueue
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := insp.QueueInfo(context.Background(), queue)
		if err == nil && info.Pending+info.Active+info.Scheduled+info.Retry == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s still holds tasks after 10s: %+v, %v", queue, info, err)
		}
		<-tick.C
	}
}

// stopAll stops the Servers' schedulers (waiting for their attempts), lets
// the worker finish what was sent, and fails the test if it ran anything
// the test has not received yet: a tick sent twice.
func stopAll(t *testing.T, runs <-chan ran, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		p.s.scheduler.Stop()
	}
	waitIdle(t, procs[0].s)
	var extra []string
	for {
		select {
		case r := <-runs:
			extra = append(extra, r.uuid)
			continue
		default:
		}
		break
	}
	if len(extra) != 0 {
		t.Fatalf("ran %d tasks more than once a tick: %v", len(extra), extra)
	}
}

// The periodic task most of these tests register: "report" every minute.
const reportSpec, reportName = "@every 1m", "report"

// registerReport registers the periodic task "report" on every proc.
func registerReport(t *testing.T, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		if err := p.s.RegisterPeriodicTask(reportSpec, reportName, &tasks.Signature{Name: "report"}); err != nil {
			t.Fatal(err)
		}
	}
}

func quietConfig() *config.Config {
	return &config.Config{Logger: slog.New(slog.DiscardHandler), NoUnixSignals: true}
}

// Servers started at different moments on one broker agree on the ticks
// of "@every 1m" (the minutes since the epoch, not a minute after each
// start), and each tick is sent by one of them.
func TestPeriodicServersStartedApartSendEachTickOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		newServer func(t *testing.T) func() *Server
	}{
		{"memory", func(t *testing.T) func() *Server {
			url := "memory://" + strings.ReplaceAll(t.Name(), "/", "-")
			return func() *Server {
				cnf := quietConfig()
				cnf.Broker, cnf.ResultBackend = url, url
				s, err := NewServer(cnf)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
		}},
		{"redis", func(t *testing.T) func() *Server {
			srv := redistest.Shared(t)
			client := srv.Client(t)
			prefix := strings.TrimSuffix(srv.Prefix(t), ":")
			return func() *Server {
				cnf := quietConfig()
				cnf.Redis = &config.RedisConfig{KeyPrefix: prefix}
				s, err := NewServerWithRedisClient(cnf, client)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newServer := tc.newServer(t)
			var procs []*proc
			for _, started := range []time.Duration{0, 17 * time.Second, 41 * time.Second} {
				procs = append(procs, newProc(newServer(), periodicStart.Add(started), 0))
			}
			runs := startWorker(t, procs[0].s)
			const spec, name = "@every 1m", "report"
			for i, p := range procs {
				if err := p.s.RegisterPeriodicTask(spec, name, &tasks.Signature{Name: "report"}); err != nil {
					t.Fatal(err)
				}
				waitArmed(t, p.clk)
				if at, _ := p.clk.NextDeadline(); !at.Equal(periodicStart.Add(time.Minute)) {
					t.Fatalf("Server %d, started at %s, waits until %s, want the minute (00:01:00)",
						i, p.clk.Now().Format(time.TimeOnly), at.Format(time.TimeOnly))
				}
			}
			for k := 1; k <= 4; k++ {
				at := periodicStart.Add(time.Duration(k) * time.Minute)
				for _, p := range procs {
					p.set(t, at)
				}
				claimants, senders := 0, 0
				for _, p := range procs {
					a := p.attemptAt(t, at)
					if a.claimed {
						claimants++
					}
					if a.sent {
						senders++
					}
				}
				if claimants != 1 || senders != 1 {
					t.Fatalf("tick %s claimed by %d Servers and sent by %d, want 1 and 1", at.Format(time.TimeOnly), claimants, senders)
				}
				if got, want := next(t, runs).uuid, tickUUID(name, spec, at); got != want {
					t.Fatalf("tick %s ran task %s, want %s", at.Format(time.TimeOnly), got, want)
				}
				waitIdle(t, procs[0].s)
			}
			stopAll(t, runs, procs...)
		})
	}
}

// sharedStore is a broker and backend that Servers share, as processes do,
// and the means to let a claim's lease run out on the broker's clock.
type sharedStore struct {
	newServer func() *Server
	// lease is the claims' lease (0: the config's LeaseDuration).
	lease time.Duration
	// setTime moves the broker's clock to at, where it has one of its own.
	setTime func(at time.Time)
	// passLease lets a lease taken before now run out.
	passLease func()
}

// memoryStore is the store of memory:// on an engine whose clock the test
// moves, its broker and backend on one store (paired) or on two; wrap, if
// given, wraps the broker.
func memoryStore(t *testing.T, paired bool, wrap func(*redisbroker.Broker) brokers.LeaseBroker) sharedStore {
	engine := redistest.StartEmbedded(t)
	now := periodicStart
	engine.SetTime(now)
	cnf := quietConfig()
	cnf.Redis = &config.RedisConfig{KeyPrefix: strings.TrimSuffix(engine.Prefix(), ":")}
	cnf = cnf.WithDefaults()
	store := rdb.New(engine.Client(t), dial.Options(cnf), false)
	backendStore := store
	if !paired {
		backendStore = rdb.New(engine.Client(t), dial.Options(cnf), false)
	}
	broker := redisbroker.NewOnStore(store, redisbroker.OptionsFrom(cnf))
	backend := redisbackend.NewOnStore(backendStore, redisbackend.Options{})
	var b brokers.LeaseBroker = broker
	if wrap != nil {
		b = wrap(broker)
	}
	t.Cleanup(func() { b.Close(); backend.Close(); store.Close(); backendStore.Close() })
	return sharedStore{
		newServer: func() *Server {
			s, err := NewServerWithBrokerBackend(quietConfig(), b, backend)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.scheduler.Stop() })
			return s
		},
		setTime: func(at time.Time) {
			now = at
			engine.SetTime(at)
		},
		passLease: func() {
			// A lease runs through its last millisecond.
			now = now.Add(cnf.LeaseDuration + time.Millisecond)
			engine.SetTime(now)
		},
	}
}

// redisStore is a Redis on which Servers claim ticks for a lease that
// Redis times; passLease ends every claim's lease there at once, as its
// time running out would (the lease is long, so that only passLease ends
// it, and a send's deadline, half a lease, is never reached on a loaded
// machine).
func redisStore(t *testing.T) sharedStore {
	srv := redistest.Shared(t)
	client := srv.Client(t)
	prefix := strings.TrimSuffix(srv.Prefix(t), ":")
	const lease = 20 * time.Second
	return sharedStore{
		newServer: func() *Server {
			cnf := quietConfig()
			cnf.Redis = &config.RedisConfig{KeyPrefix: prefix}
			s, err := NewServerWithRedisClient(cnf, client)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		lease:   lease,
		setTime: func(time.Time) {},
		passLease: func() {
			ctx := t.Context()
			keys, err := client.Keys(ctx, prefix+":claim:*").Result()
			if err == nil && len(keys) > 0 {
				err = endClaimLeases.Run(ctx, client, keys).Err()
			}
			if err != nil {
				t.Fatalf("ending the claims' leases: %v", err)
			}
		},
	}
}

// endClaimLeases makes each claim of KEYS that a lease holds say that its
// lease ended at 1 ms after the epoch (a claim's record is "<token> <lease
// end, ms> <taken over>", or "done").
var endClaimLeases = goredis.NewScript(`
for _, key in ipairs(KEYS) do
	local token, taken = string.match(redis.call("GET", key) or "", "^(%S+) %d+ ([01])$")
	if token then
		redis.call("SET", key, token .. " 1 " .. taken, "KEEPTTL")
	end
end
return 0`)

func sharedStores(t *testing.T) map[string]func(t *testing.T) sharedStore {
	return map[string]func(t *testing.T) sharedStore{
		"memory-paired":   func(t *testing.T) sharedStore { return memoryStore(t, true, nil) },
		"memory-unpaired": func(t *testing.T) sharedStore { return memoryStore(t, false, nil) },
		"redis":           redisStore,
	}
}

// takeOver lets p, which saw tick at held by a process that died, look at
// it again until it finds it unclaimed and sends it (or finds it sent):
// each time the lease runs out, p's look again comes due.
func takeOver(t *testing.T, st sharedStore, p *proc, at time.Time) {
	t.Helper()
	for range 5 {
		st.passLease()
		waitArmed(t, p.clk)
		again, _ := p.clk.NextDeadline()
		if !again.Before(at.Add(time.Minute)) {
			t.Fatalf("the Server waits until %s, want a look again at the tick %s before the next", again.Format(time.TimeOnly), at.Format(time.TimeOnly))
		}
		p.clk.Set(again)
		if p.attemptAt(t, at).sent {
			return
		}
	}
	t.Fatalf("tick %s not taken over after 5 leases", at.Format(time.TimeOnly))
}

// A process that dies after claiming a tick, before sending it, or after
// sending it, before marking it done: another process takes the tick over
// when the claim's lease ends, and the tick's task runs once.
func TestPeriodicClaimantDies(t *testing.T) {
	for storeName, newStore := range sharedStores(t) {
		for _, dies := range []struct {
			name string
			step periodic.Step
		}{{"BeforeSending", periodic.StepClaimed}, {"AfterSending", periodic.StepSent}} {
			t.Run(storeName+"/"+dies.name, func(t *testing.T) {
				st := newStore(t)
				a := newProc(st.newServer(), periodicStart, st.lease)
				b := newProc(st.newServer(), periodicStart, st.lease)
				runs := startWorker(t, b.s)
				a.dieAt.Store(int32(dies.step))
				const spec, name = reportSpec, reportName
				registerReport(t, a, b)
				at := periodicStart.Add(time.Minute)
				want := tickUUID(name, spec, at)
				st.setTime(at)

				a.set(t, at)
				if !a.attemptAt(t, at).died {
					t.Fatal("the first Server did not claim the tick")
				}
				if dies.step == periodic.StepSent {
					// The task ran and left the broker, SUCCESS.
					if got := next(t, runs).uuid; got != want {
						t.Fatalf("ran %s, want the tick's task %s", got, want)
					}
					waitIdle(t, b.s)
				}
				b.set(t, at)
				if !b.attemptAt(t, at).sent {
					takeOver(t, st, b, at)
				}
				if dies.step == periodic.StepClaimed {
					if got := next(t, runs).uuid; got != want {
						t.Fatalf("ran %s, want the tick's task %s", got, want)
					}
				}
				stopAll(t, runs, a, b)
			})
		}
	}
}

// A process that fires a tick late, after the process that claimed and
// sent it died and its lease ended, takes the tick over at once, and finds
// it sent.
func TestPeriodicLateTakeOverFindsTheTickSent(t *testing.T) {
	for storeName, newStore := range sharedStores(t) {
		t.Run(storeName, func(t *testing.T) {
			st := newStore(t)
			a := newProc(st.newServer(), periodicStart, st.lease)
			b := newProc(st.newServer(), periodicStart, st.lease)
			runs := startWorker(t, b.s)
			a.dieAt.Store(int32(periodic.StepSent))
			const spec, name = reportSpec, reportName
			registerReport(t, a, b)
			at := periodicStart.Add(time.Minute)
			st.setTime(at)
			a.set(t, at)
			if !a.attemptAt(t, at).died {
				t.Fatal("the first Server did not send the tick")
			}
			if got, want := next(t, runs).uuid, tickUUID(name, spec, at); got != want {
				t.Fatalf("ran %s, want the tick's task %s", got, want)
			}
			waitIdle(t, b.s)
			st.passLease()
			b.set(t, at)
			if got := b.attemptAt(t, at); !got.claimed || !got.sent {
				t.Fatalf("the late Server's attempt: %+v, want it to take the tick over and find it sent", got)
			}
			stopAll(t, runs, a, b)
		})
	}
}

// flakyBroker publishes only the first keep tasks of each of the first
// fail PublishTasks calls, then reports an error, as a broker that fails part
// way through a publish does.
type flakyBroker struct {
	*redisbroker.Broker
	mu         sync.Mutex
	fail, keep int
}

var errFlaky = errors.New("flaky broker: publish failed")

func (b *flakyBroker) PublishTasks(ctx context.Context, sigs ...*tasks.Signature) error {
	b.mu.Lock()
	fail := b.fail > 0
	b.fail--
	b.mu.Unlock()
	if !fail {
		return b.Broker.PublishTasks(ctx, sigs...)
	}
	if n := min(b.keep, len(sigs)); n > 0 {
		if err := b.Broker.PublishTasks(ctx, sigs[:n]...); err != nil {
			return err
		}
	}
	return errFlaky
}

// A send that the broker refuses is not lost: the process tries it again
// when its claim's lease ends.
func TestPeriodicFailedSendIsTriedAgain(t *testing.T) {
	st := memoryStore(t, false, func(b *redisbroker.Broker) brokers.LeaseBroker { return &flakyBroker{Broker: b, fail: 1} })
	p := newProc(st.newServer(), periodicStart, 0)
	runs := startWorker(t, p.s)
	const spec, name = reportSpec, reportName
	registerReport(t, p)
	at := periodicStart.Add(time.Minute)
	st.setTime(at)
	p.set(t, at)
	if p.attemptAt(t, at).sent {
		t.Fatal("the tick was sent through a broker that refused it")
	}
	takeOver(t, st, p, at)
	if got, want := next(t, runs).uuid, tickUUID(name, spec, at); got != want {
		t.Fatalf("ran %s, want the tick's task %s", got, want)
	}
	stopAll(t, runs, p)
}

// A chord whose group was published in part before the send failed: the
// next attempt sends the members that were not sent, and only those (two
// have run by then), and the callback runs once, with every result.
func TestPeriodicChordSentInPartGetsTheRest(t *testing.T) {
	st := memoryStore(t, false, func(b *redisbroker.Broker) brokers.LeaseBroker {
		return &flakyBroker{Broker: b, fail: 1, keep: 2}
	})
	p := newProc(st.newServer(), periodicStart, 0)
	runs := startWorker(t, p.s)
	var parts []*tasks.Signature
	for i := range 4 {
		parts = append(parts, &tasks.Signature{Name: "part", Args: []tasks.Arg{{Type: "int64", Value: int64(i + 1)}}})
	}
	if err := p.s.RegisterPeriodicChord("@every 1m", "chord", 0, &tasks.Signature{Name: "sum"}, parts...); err != nil {
		t.Fatal(err)
	}
	at := periodicStart.Add(time.Minute)
	st.setTime(at)
	p.set(t, at)
	if p.attemptAt(t, at).sent {
		t.Fatal("the chord was sent whole through a broker that failed part way")
	}
	seen := map[string]bool{}
	for range 2 {
		seen[next(t, runs).uuid] = true
	}
	waitIdle(t, p.s)
	takeOver(t, st, p, at)
	var sum ran
	for range 3 {
		r := next(t, runs)
		if strings.HasPrefix(r.uuid, "chord_") {
			sum = r
			continue
		}
		if seen[r.uuid] {
			t.Fatalf("member %s ran twice", r.uuid)
		}
		seen[r.uuid] = true
	}
	if sum.uuid == "" {
		sum = next(t, runs)
	}
	if len(seen) != 4 || sum.sum != 1+2+3+4 {
		t.Fatalf("members run: %d, callback %s with sum %d; want 4 and one callback with 10", len(seen), sum.uuid, sum.sum)
	}
	stopAll(t, runs, p)
}

// notClaimer hides the Claimer of the broker it wraps, as a user's own
// broker would lack one.
type notClaimer struct {
	brokers.LeaseBroker
	brokers.Inspector
}

// On a broker that is not a Claimer, machinery's lock, given to
// NewServerWithBrokerBackendLock, lets one Server send each tick.
func TestPeriodicWithoutClaimerTakesTheLock(t *testing.T) {
	st := memoryStore(t, false, func(b *redisbroker.Broker) brokers.LeaseBroker { return notClaimer{b, b} })
	base := st.newServer()
	lock, err := LockFactory(&config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var procs []*proc
	for range 2 {
		s := NewServerWithBrokerBackendLock(quietConfig(), base.GetBroker(), base.GetBackend(), lock)
		t.Cleanup(func() { s.scheduler.Stop() })
		procs = append(procs, newProc(s, periodicStart, 0))
	}
	runs := startWorker(t, base)
	for _, p := range procs {
		if err := p.s.RegisterPeriodicTask("@every 1m", "report", &tasks.Signature{Name: "report"}); err != nil {
			t.Fatal(err)
		}
	}
	for k := 1; k <= 2; k++ {
		at := periodicStart.Add(time.Duration(k) * time.Minute)
		senders := 0
		for _, p := range procs {
			p.set(t, at)
			if p.attemptAt(t, at).sent {
				senders++
			}
		}
		if senders != 1 {
			t.Fatalf("tick %s sent by %d Servers, want 1", at.Format(time.TimeOnly), senders)
		}
		next(t, runs)
	}
	stopAll(t, runs, procs...)
}

// A claim whose reply was lost, sent again by go-redis, finds its own
// first run's lease and reports it won: the tick is sent at once, not left
// to a takeover when the lease ends.
func TestPeriodicClaimWhoseReplyWasLostIsKept(t *testing.T) {
	srv := redistest.Shared(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	client := goredis.NewClient(&goredis.Options{Addr: proxy.Addr(), ReadTimeout: 200 * time.Millisecond, PoolSize: 1})
	t.Cleanup(func() { _ = client.Close() })
	cnf := quietConfig()
	cnf.Redis = &config.RedisConfig{KeyPrefix: strings.TrimSuffix(srv.Prefix(t), ":")}
	s, err := NewServerWithRedisClient(cnf, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := newProc(s, periodicStart, 0)
	claimer := s.GetBroker().(brokers.Claimer)
	ctx := context.Background()
	if _, err := claimer.ClaimLease(ctx, "warm", time.Second, time.Second); err != nil { // loads the script
		t.Fatal(err)
	}
	if err := s.RegisterPeriodicTask("@every 1m", "report", &tasks.Signature{Name: "report"}); err != nil {
		t.Fatal(err)
	}
	at := periodicStart.Add(time.Minute)
	proxy.LoseReplyTo("periodic:report") // the claim's
	p.set(t, at)
	if got := p.attemptAt(t, at); !got.claimed || !got.sent {
		t.Fatalf("attempt whose claim's reply was lost: %+v, want it claimed and sent", got)
	}
	info, err := s.GetBroker().(brokers.Inspector).QueueInfo(ctx, s.GetConfig().DefaultQueue)
	if err != nil || info.Pending != 1 {
		t.Fatalf("queue after the tick: %+v, %v; want its task pending", info, err)
	}
}

// A process that fires a tick later than its claim's keep (it was paused
// past it) does not send it: the claim record may be gone, so a free key no
// longer says that nobody sent the tick.
func TestPeriodicTickFiredTooLateIsNotSentAgain(t *testing.T) {
	st := memoryStore(t, true, nil)
	a := newProc(st.newServer(), periodicStart, 0)
	b := newProc(st.newServer(), periodicStart, 0)
	runs := startWorker(t, a.s)
	const spec, name = reportSpec, reportName
	registerReport(t, a, b)
	at := periodicStart.Add(time.Minute)
	st.setTime(at)
	a.set(t, at)
	if !a.attemptAt(t, at).sent {
		t.Fatal("the first Server did not send the tick")
	}
	if got := next(t, runs).uuid; got != tickUUID(name, spec, at) {
		t.Fatalf("ran %s, want the tick's task %s", got, tickUUID(name, spec, at))
	}
	waitIdle(t, a.s)
	// b was paused through the tick and past its claim's keep: its clock
	// reads late when it wakes, never the tick's time.
	late := at.Add(10 * time.Minute)
	st.setTime(late)
	waitArmed(t, b.clk)
	b.clk.Jump(late)
	if b.attemptAt(t, at).sent {
		t.Fatalf("a Server that fired tick %s 10 minutes late sent it again", at.Format(time.TimeOnly))
	}
	stopAll(t, runs, a, b)
}
