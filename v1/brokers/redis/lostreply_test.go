package redisbroker_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/tasks"
)

// lostReply is a broker and backend on one store whose client reaches
// Redis through a proxy that can lose replies: a command whose reply is
// lost has run, and the client, after its read timeout, sends it again on
// a new connection (go-redis's retries), as when Redis hangs past the read
// timeout and then runs both copies.
type lostReply struct {
	proxy   *redistest.Proxy
	broker  *redisbroker.Broker
	backend *redisbackend.Backend
	queue   string
}

func newLostReply(t *testing.T) *lostReply {
	srv := redistest.Shared(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	client := goredis.NewClient(&goredis.Options{
		Addr:        proxy.Addr(),
		ReadTimeout: 200 * time.Millisecond,
		PoolSize:    1,
	})
	t.Cleanup(func() { _ = client.Close() })
	cnf := (&config.Config{
		Broker:        srv.URL(),
		ResultBackend: srv.URL(),
		Redis:         &config.RedisConfig{KeyPrefix: srv.Prefix(t)},
	}).WithDefaults()
	store := rdb.New(client, dial.Options(cnf), false)
	broker := redisbroker.NewOnStore(store, redisbroker.OptionsFrom(cnf))
	backend := redisbackend.NewOnStore(store, redisbackend.Options{})
	t.Cleanup(func() {
		_ = broker.Close()
		_ = backend.Close()
		_ = store.Close()
	})
	if broker.Join(backend) == nil {
		t.Fatal("broker and backend on one store are not paired")
	}
	return &lostReply{proxy: proxy, broker: broker, backend: backend, queue: "q"}
}

// loseReplyTo makes the reply to the next command that contains text
// go missing (not that of a command go-redis sends first on its own).
func (l *lostReply) loseReplyTo(t *testing.T, texts ...string) {
	t.Helper()
	l.proxy.LoseReplyTo(texts...)
}

// warmPublish publishes a first task, which registers the queue and loads
// the enqueue script: a reply lost after it is the script's own.
func (l *lostReply) warmPublish(t *testing.T) {
	t.Helper()
	warm := &tasks.Signature{UUID: "task_warm", Name: "add", RoutingKey: l.queue}
	if err := l.broker.PublishPending(ctxFor(t), store.SendParams{Tasks: []*tasks.Signature{warm}}); err != nil {
		t.Fatalf("PublishPending: %v", err)
	}
}

func (l *lostReply) take(t *testing.T, id string) *brokers.Delivery {
	t.Helper()
	sig := &tasks.Signature{UUID: "task_" + id, Name: "add", RoutingKey: l.queue}
	if err := l.broker.PublishPending(ctxFor(t), store.SendParams{Tasks: []*tasks.Signature{sig}}); err != nil {
		t.Fatalf("PublishPending: %v", err)
	}
	ds, err := l.broker.Fetch(ctxFor(t), []string{l.queue}, 1, nil)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: %d deliveries, %v", len(ds), err)
	}
	return ds[0]
}

func (l *lostReply) info(t *testing.T) brokers.QueueInfo {
	t.Helper()
	info, err := l.broker.QueueInfo(ctxFor(t), l.queue)
	if err != nil {
		t.Fatalf("QueueInfo: %v", err)
	}
	return *info
}

// TestLostReplyPublishReportsSuccess: a publish whose reply was lost, sent
// again by go-redis, is reported as the success it was, and the task is
// queued once (it reported ErrDuplicateTask). So is one whose UUID its
// send made (it looks for no earlier task with it): it is sent again as a
// repeat, which finds the first run's task. Publishing the task again is
// refused.
func TestLostReplyPublishReportsSuccess(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		fresh bool
	}{
		{"a UUID the caller chose", false},
		{"a UUID its send made", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := newLostReply(t)
			l.warmPublish(t)
			l.loseReplyTo(t, "evalsha", "task_once")
			sig := &tasks.Signature{UUID: "task_once", Name: "add", RoutingKey: l.queue}
			ctx := ctxFor(t)
			if err := l.broker.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig}, Fresh: c.fresh}); err != nil {
				t.Fatalf("PublishPending with its reply lost: %v, want nil (it was published)", err)
			}
			if info := l.info(t); info.Pending != 2 {
				t.Fatalf("pending after two publishes: %d, want 2", info.Pending)
			}
			if err := l.broker.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig}}); !errors.Is(err, brokers.ErrDuplicateTask) {
				t.Fatalf("the same publish again: %v, want ErrDuplicateTask", err)
			}
		})
	}
}

// TestLostReplyPublishOvertakenByItsRepeatQueuesOnce: a publish whose
// first attempt is held up on its way to Redis (a server that hangs with
// the request in its socket buffer) times out and is sent again; the
// attempt sent again queues the task and reports success; then the first
// attempt runs. It writes nothing: the task is pending once and taken
// once, or, when it ran and was forgotten in between, not queued again.
// The first attempt of a send that made its UUID looked up nothing and
// queued the task a second time, and a worker ran it twice; one with a
// UUID the caller chose queued again a task that had run.
func TestLostReplyPublishOvertakenByItsRepeatQueuesOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		fresh bool
	}{
		{"a UUID the caller chose", false},
		{"a UUID its send made", true},
	} {
		for _, ran := range []bool{false, true} {
			name := c.name + ", the task waiting"
			if ran {
				name = c.name + ", the task run and forgotten"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := ctxFor(t)
				p := newProxied(t)
				sender := redisbroker.NewOnStore(p.viaProxy, redisbroker.OptionsFrom(p.cnf))
				worker := redisbroker.NewOnStore(p.direct, redisbroker.OptionsFrom(p.cnf))
				t.Cleanup(func() {
					_ = sender.Close()
					_ = worker.Close()
				})
				const queue = "q"
				fetch := func(n int) []*brokers.Delivery {
					t.Helper()
					ds, err := worker.Fetch(ctx, []string{queue}, n, nil)
					if err != nil {
						t.Fatalf("Fetch: %v", err)
					}
					return ds
				}
				// The script is loaded first, so the attempt held is the
				// publish's own.
				if err := sender.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{{UUID: "task_warm", Name: "add", RoutingKey: queue}}}); err != nil {
					t.Fatalf("PublishPending: %v", err)
				}
				if err := worker.Ack(ctx, fetch(1)[0]); err != nil {
					t.Fatalf("Ack: %v", err)
				}

				sig := &tasks.Signature{UUID: "task_overtaken", Name: "add", RoutingKey: queue}
				hold := p.proxy.HoldCommandTo("evalsha", sig.UUID)
				defer hold.Release()
				if err := sender.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig}, Fresh: c.fresh}); err != nil {
					t.Fatalf("PublishPending whose first attempt is held: %v, want nil (sent again)", err)
				}
				select {
				case <-hold.Held():
				default:
					t.Fatal("the publish's first attempt was not held")
				}
				if ran {
					d := fetch(1)[0]
					if _, err := worker.AckSuccess(ctx, d, tasks.NewSuccessTaskState(d.Signature, nil), nil, nil); err != nil {
						t.Fatalf("AckSuccess: %v", err)
					}
				}
				hold.Release()
				select {
				case <-hold.Replied():
				case <-ctx.Done():
					t.Fatal("the first attempt, let through, got no reply")
				}
				pending, err := p.directClient.LRange(ctx, p.cnf.Redis.KeyPrefix+":{"+queue+"}:pending", 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				want := []string{sig.UUID}
				if ran {
					want = nil
				}
				if !slices.Equal(pending, want) {
					t.Fatalf("pending after the first attempt ran: %q, want %q", pending, want)
				}
				if ran {
					return
				}
				ds := fetch(2)
				if len(ds) != 1 || ds[0].Signature.UUID != sig.UUID {
					t.Fatalf("Fetch of 2 took %d deliveries, want the task once", len(ds))
				}
				if err := worker.Ack(ctx, ds[0]); err != nil {
					t.Fatalf("Ack: %v", err)
				}
				if info, err := worker.QueueInfo(ctx, queue); err != nil || info.Pending != 0 || info.Active != 0 {
					t.Fatalf("queue after the task ran: %+v, %v; want it empty", info, err)
				}
			})
		}
	}
}

// TestLostReplySettleReportsSuccess: an acknowledgement (or retry,
// archive, requeue) whose reply was lost is sent again and reported as the
// settle it was, not as a lost lease.
func TestLostReplySettleReportsSuccess(t *testing.T) {
	t.Parallel()
	results := []*tasks.TaskResult{{Type: "int64", Value: 2}}
	for _, tc := range []struct {
		name   string
		settle func(ctx context.Context, b *redisbroker.Broker, d *brokers.Delivery) error
		want   brokers.QueueInfo
	}{
		{"Ack", func(ctx context.Context, b *redisbroker.Broker, d *brokers.Delivery) error {
			return b.Ack(ctx, d)
		}, brokers.QueueInfo{}},
		{"AckSuccess", func(ctx context.Context, b *redisbroker.Broker, d *brokers.Delivery) error {
			next := &tasks.Signature{UUID: "task_next_" + d.Signature.UUID, Name: "add", RoutingKey: d.Queue}
			_, err := b.AckSuccess(ctx, d, tasks.NewSuccessTaskState(d.Signature, results), []*tasks.Signature{next}, nil)
			return err
		}, brokers.QueueInfo{Pending: 1}},
		{"Retry", func(ctx context.Context, b *redisbroker.Broker, d *brokers.Delivery) error {
			return b.Retry(ctx, d, time.Now().Add(time.Hour), "later")
		}, brokers.QueueInfo{Retry: 1}},
		{"Archive", func(ctx context.Context, b *redisbroker.Broker, d *brokers.Delivery) error {
			return b.Archive(ctx, d, "boom")
		}, brokers.QueueInfo{Archived: 1}},
		{"Requeue", func(ctx context.Context, b *redisbroker.Broker, d *brokers.Delivery) error {
			return b.Requeue(ctx, d)
		}, brokers.QueueInfo{Pending: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLostReply(t)
			// The first settle loads the script: the reply lost is the
			// second's.
			if err := tc.settle(ctxFor(t), l.broker, l.take(t, "warm")); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			d := l.take(t, "lost")
			l.loseReplyTo(t, "evalsha", "task_lost")
			if err := tc.settle(ctxFor(t), l.broker, d); err != nil {
				t.Fatalf("%s with its reply lost: %v, want nil (it settled)", tc.name, err)
			}
			got := l.info(t)
			tc.want.Pending, tc.want.Retry, tc.want.Archived = 2*tc.want.Pending, 2*tc.want.Retry, 2*tc.want.Archived
			if got.Active != 0 || got.Pending != tc.want.Pending || got.Retry != tc.want.Retry || got.Archived != tc.want.Archived || got.Scheduled != 0 {
				t.Fatalf("queue after %s: %+v, want %+v", tc.name, got, tc.want)
			}
		})
	}
}

// TestLostReplySettleTakePutsBackItsTask: a settle with a take (AckTake,
// AckSuccess with a take) whose reply was lost is reported as the settle
// it was, takes nothing when sent again, and the task its first run took,
// which nobody runs, is put back at once rather than at its lease's end.
func TestLostReplySettleTakePutsBackItsTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		settle func(ctx context.Context, b *redisbroker.Broker, d *brokers.Delivery) (*brokers.Delivery, error)
	}{
		{"AckTake", func(ctx context.Context, b *redisbroker.Broker, d *brokers.Delivery) (*brokers.Delivery, error) {
			return b.AckTake(ctx, d, brokers.Take{})
		}},
		{"AckSuccess", func(ctx context.Context, b *redisbroker.Broker, d *brokers.Delivery) (*brokers.Delivery, error) {
			return b.AckSuccess(ctx, d, tasks.NewSuccessTaskState(d.Signature, nil), nil, &brokers.Take{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLostReply(t)
			// The first settle loads the script: the reply lost is the
			// second's.
			if _, err := tc.settle(ctxFor(t), l.broker, l.take(t, "warm")); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			d := l.take(t, "lost")
			next := &tasks.Signature{UUID: "task_next", Name: "add", RoutingKey: l.queue}
			if err := l.broker.PublishPending(ctxFor(t), store.SendParams{Tasks: []*tasks.Signature{next}}); err != nil {
				t.Fatalf("PublishPending: %v", err)
			}
			l.loseReplyTo(t, "evalsha", "task_lost")
			taken, err := tc.settle(ctxFor(t), l.broker, d)
			if err != nil || taken != nil {
				t.Fatalf("%s with its reply lost: took %v, %v; want nothing, nil (it settled)", tc.name, taken, err)
			}
			if got := l.info(t); got.Active != 0 || got.Pending != 1 {
				t.Fatalf("queue after %s with its reply lost: %+v, want the task its first run took pending again", tc.name, got)
			}
			ds, err := l.broker.Fetch(ctxFor(t), []string{l.queue}, 1, nil)
			if err != nil || len(ds) != 1 || ds[0].Signature.UUID != next.UUID || ds[0].Recovered != 0 {
				t.Fatalf("Fetch: %d deliveries, %v; want %s, not counted as recovered", len(ds), err, next.UUID)
			}
		})
	}
}

// TestLostReplyClaimIsKept: a claim whose reply was lost, sent again,
// finds its own first run's lease and reports it won.
func TestLostReplyClaimIsKept(t *testing.T) {
	t.Parallel()
	l := newLostReply(t)
	// The script is loaded first, so the lost reply is the claim's own.
	if _, err := l.broker.ClaimLease(ctxFor(t), "warm:"+t.Name(), time.Minute, time.Minute); err != nil {
		t.Fatalf("ClaimLease: %v", err)
	}
	key := "tick:" + t.Name()
	l.loseReplyTo(t, key)
	r, err := l.broker.ClaimLease(ctxFor(t), key, time.Minute, time.Minute)
	if err != nil || r.Status != brokers.ClaimWon {
		t.Fatalf("ClaimLease with its reply lost: %+v, %v; want won, nil", r, err)
	}
	if r, err := l.broker.ClaimLease(ctxFor(t), key, time.Minute, time.Minute); err != nil || r.Status != brokers.ClaimHeld {
		t.Fatalf("second ClaimLease: %+v, %v; want held, nil", r, err)
	}
}

// proxied is a store whose client reaches Redis through a proxy that can
// lose replies, waiting a second for each (time for the others to act
// before it sends a command again), and a store straight to the same
// Redis, under one key prefix.
type proxied struct {
	proxy            *redistest.Proxy
	cnf              *config.Config
	viaProxy, direct *rdb.Store
	directClient     *goredis.Client
}

func newProxied(t *testing.T) *proxied {
	srv := redistest.Shared(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	cnf := (&config.Config{
		Broker:        srv.URL(),
		ResultBackend: srv.URL(),
		Redis:         &config.RedisConfig{KeyPrefix: srv.Prefix(t)},
	}).WithDefaults()
	viaProxy := goredis.NewClient(&goredis.Options{Addr: proxy.Addr(), ReadTimeout: time.Second, PoolSize: 1})
	t.Cleanup(func() { _ = viaProxy.Close() })
	direct := srv.Client(t)
	p := &proxied{
		proxy: proxy, cnf: cnf, directClient: direct,
		viaProxy: rdb.New(viaProxy, dial.Options(cnf), false),
		direct:   rdb.New(direct, dial.Options(cnf), false),
	}
	// After the brokers on them close (cleanups run last first): a
	// maintainer's watch opens the store's subscription.
	t.Cleanup(func() {
		_ = p.viaProxy.Close()
		_ = p.direct.Close()
	})
	return p
}

// TestLostReplyPublishOfATaskThatRanIsNotRepeated: a publish whose reply
// was lost, and whose task was then taken, run and forgotten before the
// client sent it again, is reported as the success it was, and the task is
// not queued a second time (it was, and ran twice). Its PENDING state was
// implicit: the SUCCESS its worker wrote says it ran.
func TestLostReplyPublishOfATaskThatRanIsNotRepeated(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	p := newProxied(t)
	proxy, cnf, direct := p.proxy, p.cnf, p.directClient
	sender := redisbroker.NewOnStore(p.viaProxy, redisbroker.OptionsFrom(cnf))
	worker := redisbroker.NewOnStore(p.direct, redisbroker.OptionsFrom(cnf))
	t.Cleanup(func() {
		_ = sender.Close()
		_ = worker.Close()
	})
	const queue = "q"
	warm := &tasks.Signature{UUID: "task_warm", Name: "add", RoutingKey: queue}
	if err := sender.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{warm}}); err != nil {
		t.Fatalf("PublishPending: %v", err)
	}
	take := func() {
		ds, err := worker.Fetch(ctx, []string{queue}, 1, nil)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Fetch: %d deliveries, %v", len(ds), err)
		}
		success := tasks.NewSuccessTaskState(ds[0].Signature, nil)
		if _, err := worker.AckSuccess(ctx, ds[0], success, nil, nil); err != nil {
			t.Fatalf("AckSuccess: %v", err)
		}
	}
	take() // the warm-up task

	proxy.LoseReplyTo("evalsha", "task_ran")
	sig := &tasks.Signature{UUID: "task_ran", Name: "add", RoutingKey: queue}
	done := make(chan error, 1)
	go func() { done <- sender.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig}}) }()
	pending := cnf.Redis.KeyPrefix + ":{" + queue + "}:pending"
	for direct.LLen(ctx, pending).Val() == 0 { // the first run landed
		select {
		case err := <-done:
			t.Fatalf("the publish returned (%v) before its lost reply timed out", err)
		default:
		}
		time.Sleep(time.Millisecond)
	}
	proxy.Stall() // the sender's second run waits until the task is gone
	take()
	proxy.Unstall()
	if err := <-done; err != nil {
		t.Fatalf("PublishPending whose task ran meanwhile: %v, want nil", err)
	}
	if n := direct.LLen(ctx, pending).Val(); n != 0 {
		t.Fatalf("%d tasks pending after the publish was sent again: the task was queued twice", n)
	}
}

// TestLostReplyFetchPutsTheTasksBack: a fetch whose reply was lost took
// tasks nobody will run; they go back to the head of the queue at once,
// not when their leases end.
func TestLostReplyFetchPutsTheTasksBack(t *testing.T) {
	t.Parallel()
	l := newLostReply(t)
	// The first fetch loads the script: the reply lost is the second's.
	if err := l.broker.Ack(ctxFor(t), l.take(t, "warm")); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	for _, id := range []string{"a", "b", "c"} {
		sig := &tasks.Signature{UUID: "task_" + id, Name: "add", RoutingKey: l.queue}
		if err := l.broker.PublishPending(ctxFor(t), store.SendParams{Tasks: []*tasks.Signature{sig}}); err != nil {
			t.Fatalf("PublishPending: %v", err)
		}
	}
	l.loseReplyTo(t, ":paused", ":lease") // keys only the fetch's script names both of
	if ds, err := l.broker.Fetch(ctxFor(t), []string{l.queue}, 3, nil); err == nil {
		t.Fatalf("Fetch with its reply lost: %d deliveries and no error", len(ds))
	}
	if got := l.info(t); got.Pending != 3 || got.Active != 0 {
		t.Fatalf("queue right after the lost fetch: %+v, want the 3 tasks pending, none active", got)
	}
	ds, err := l.broker.Fetch(ctxFor(t), []string{l.queue}, 3, nil)
	if err != nil || len(ds) != 3 {
		t.Fatalf("Fetch: %d deliveries, %v; want 3", len(ds), err)
	}
	for i, id := range []string{"a", "b", "c"} {
		if got := ds[i].Signature.UUID; got != "task_"+id {
			t.Errorf("delivery %d is %s, want task_%s: the tasks keep their order", i, got, id)
		}
	}
}

// TestLostReplyChordDueIsNotRepeated: the acknowledgement of a chord
// member that completes its group leaves the task unsettled (ErrChordDue)
// with its outcome committed; when its reply is lost, the run again finds
// the outcome and does nothing, so the OnSuccess task its first run sent,
// taken, run and forgotten meanwhile, is not sent a second time.
func TestLostReplyChordDueIsNotRepeated(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	p := newProxied(t)
	proxy, cnf := p.proxy, p.cnf
	member := redisbroker.NewOnStore(p.viaProxy, redisbroker.OptionsFrom(cnf))
	other := redisbroker.NewOnStore(p.direct, redisbroker.OptionsFrom(cnf))
	states := redisbackend.NewOnStore(p.direct, redisbackend.Options{})
	t.Cleanup(func() {
		_ = member.Close()
		_ = other.Close()
	})
	const queue, nextQueue = "q", "nq"
	take := func(b *redisbroker.Broker, q string) *brokers.Delivery {
		ds, err := b.Fetch(ctx, []string{q}, 1, nil)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Fetch from %s: %d deliveries, %v", q, len(ds), err)
		}
		return ds[0]
	}
	settle := func(b *redisbroker.Broker, d *brokers.Delivery, next ...*tasks.Signature) error {
		_, err := b.AckSuccess(ctx, d, tasks.NewSuccessTaskState(d.Signature, nil), next, nil)
		return err
	}
	// The script is loaded first, so the lost reply is the member's own.
	if err := member.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{{UUID: "task_warm", Name: "add", RoutingKey: queue}}}); err != nil {
		t.Fatalf("PublishPending: %v", err)
	}
	if err := settle(member, take(member, queue)); err != nil {
		t.Fatalf("AckSuccess: %v", err)
	}
	m := &tasks.Signature{UUID: "task_member", Name: "add", RoutingKey: queue, GroupUUID: "group_g", GroupTaskCount: 1,
		ChordCallback: &tasks.Signature{UUID: "task_callback", Name: "sum", RoutingKey: queue}}
	if err := member.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{m}}); err != nil {
		t.Fatalf("PublishPending: %v", err)
	}
	d := take(member, queue)
	next := &tasks.Signature{UUID: "task_next", Name: "add", RoutingKey: nextQueue}

	proxy.LoseReplyTo("evalsha", "task_member")
	done := make(chan error, 1)
	go func() { done <- settle(member, d, next) }()
	ran := take(other, nextQueue) // the first run sent it
	proxy.Stall()                 // the member's run again waits until the next task ran
	if err := settle(other, ran); err != nil {
		t.Fatalf("AckSuccess of the next task: %v", err)
	}
	proxy.Unstall()
	if err := <-done; !errors.Is(err, brokers.ErrChordDue) {
		t.Fatalf("the member's AckSuccess with its reply lost: %v, want ErrChordDue", err)
	}
	info, err := other.QueueInfo(ctx, nextQueue)
	if err != nil {
		t.Fatal(err)
	}
	st, err := states.GetStateContext(ctx, next.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Pending != 0 || st.State != tasks.StateSuccess {
		t.Fatalf("after the run again: %d next tasks pending, its state %s; want 0 and SUCCESS (sent once)", info.Pending, st.State)
	}
}
