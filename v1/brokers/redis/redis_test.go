package redisbroker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/waitfor"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	"github.com/b6192125/machinist/v1/brokers/brokertest"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/tasks"
)

func TestMain(m *testing.M) {
	os.Exit(redistest.RunMain(m))
}

// newBroker returns a broker on client under a key prefix of the test's own.
func newBroker(t *testing.T, client goredis.UniversalClient, prefix string, cnf *config.Config) *redisbroker.Broker {
	t.Helper()
	if cnf == nil {
		cnf = (&config.Config{}).WithDefaults()
	}
	cnf.Redis.KeyPrefix = strings.TrimSuffix(prefix, ":")
	b := newBrokerOn(client, cnf)
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformanceStandalone(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	brokertest.Exercise(t, func(t *testing.T, cnf *config.Config) brokertest.Broker {
		b := newBroker(t, client, srv.Prefix(t), cnf)
		return conformant{b, client, cnf.Redis.KeyPrefix}
	})
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.SharedCluster(t)
	client := cluster.Client(t)
	brokertest.Exercise(t, func(t *testing.T, cnf *config.Config) brokertest.Broker {
		b := newBroker(t, client, cluster.Prefix(t), cnf)
		return conformant{b, client, cnf.Redis.KeyPrefix}
	})
}

// The store on the engine that runs it for memory:// passes the suite that
// it passes on Redis. Each broker has an engine of its own, whose clock
// its checks of what lasts its time stop and move.
func TestConformanceEmbedded(t *testing.T) {
	t.Parallel()
	brokertest.Exercise(t, func(t *testing.T, cnf *config.Config) brokertest.Broker {
		return newOnEngine(t, cnf)
	})
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func publishOne(t *testing.T, b brokers.Broker, queue string) *tasks.Signature {
	t.Helper()
	sig, _ := tasks.NewSignature("job", []tasks.Arg{{Type: "int64", Value: 7}})
	sig.RoutingKey = queue
	if err := b.Publish(ctxFor(t), sig); err != nil {
		t.Fatal(err)
	}
	return sig
}

func TestStaleWorkerCannotAcknowledgeAfterTakeover(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	cnf := (&config.Config{LeaseDuration: time.Second, RecoverInterval: 20 * time.Millisecond}).WithDefaults()
	b := newBroker(t, client, srv.Prefix(t), cnf)
	ctx := ctxFor(t)
	publishOne(t, b, "takeover")

	stale, err := b.Fetch(ctx, []string{"takeover"}, 1, nil)
	if err != nil || len(stale) != 1 {
		t.Fatalf("first fetch: %v, %v", stale, err)
	}
	// The stale worker stops renewing; the recoverer hands the task to a
	// new worker.
	fresh, err := b.Fetch(ctx, []string{"takeover"}, 1, nil)
	if err != nil || len(fresh) != 1 {
		t.Fatalf("second fetch: %v, %v", fresh, err)
	}
	if fresh[0].Recovered != 1 || fresh[0].Lease.Token() == stale[0].Lease.Token() {
		t.Fatalf("takeover: recovered %d, same token %v", fresh[0].Recovered, fresh[0].Lease.Token() == stale[0].Lease.Token())
	}
	for name, settle := range map[string]func(*brokers.Delivery) error{
		"Ack":     func(d *brokers.Delivery) error { return b.Ack(ctx, d) },
		"Retry":   func(d *brokers.Delivery) error { return b.Retry(ctx, d, time.Now(), "x") },
		"Archive": func(d *brokers.Delivery) error { return b.Archive(ctx, d, "x") },
		"Requeue": func(d *brokers.Delivery) error { return b.Requeue(ctx, d) },
	} {
		if err := settle(stale[0]); !errors.Is(err, brokers.ErrLeaseLost) {
			t.Errorf("stale %s: %v, want ErrLeaseLost", name, err)
		}
	}
	if err := b.ExtendLeases(ctx, stale[0]); err != nil {
		t.Fatal(err)
	}
	if stale[0].Lease.Valid() {
		t.Error("the stale lease is still valid after a refused renewal")
	}
	if err := b.Ack(ctx, fresh[0]); err != nil {
		t.Fatalf("new holder's Ack: %v", err)
	}
	info, err := b.QueueInfo(ctx, "takeover")
	if err != nil || info.Pending+info.Active+info.Retry+info.Archived != 0 {
		t.Fatalf("queue after ack: %+v, %v", info, err)
	}
}

func TestUndecodableMessageIsDeliveredWithTheError(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	prefix := strings.TrimSuffix(srv.Prefix(t), ":")
	b := newBroker(t, client, prefix+":", nil)
	ctx := ctxFor(t)
	good := publishOne(t, b, "garbage")
	// Another program wrote a message that is not a signature.
	key := fmt.Sprintf("%s:{garbage}:t:bad1", prefix)
	if err := client.HSet(ctx, key, "msg", "{not json", "state", "pending").Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.LPush(ctx, prefix+":{garbage}:pending", "bad1").Err(); err != nil {
		t.Fatal(err)
	}
	ds, err := b.Fetch(ctx, []string{"garbage"}, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Signature.UUID != "bad1" || ds[1].Signature.UUID != good.UUID {
		t.Fatalf("fetched %d tasks, want the bad one and the good one", len(ds))
	}
	bad := ds[0]
	if bad.Err == nil || !strings.Contains(bad.Err.Error(), "cannot decode") || bad.Signature.RoutingKey != "garbage" {
		t.Fatalf("undecodable delivery: Err %v, signature %+v; want a decoding error and the queue", bad.Err, bad.Signature)
	}
	if ds[1].Err != nil {
		t.Fatalf("good delivery with Err %v", ds[1].Err)
	}
}

func TestKeysShareTheQueueHashTag(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	prefix := srv.Prefix(t)
	b := newBroker(t, client, prefix, nil)
	ctx := ctxFor(t)
	publishOne(t, b, "tagged")
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys written")
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ":queues") {
			continue
		}
		if !strings.Contains(k, "{tagged}") {
			t.Errorf("key %q lacks the {tagged} hash tag", k)
		}
	}
}

func TestQueueNamesWithBracesAreRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	b := newBroker(t, srv.Client(t), srv.Prefix(t), nil)
	sig, _ := tasks.NewSignature("job", nil)
	sig.RoutingKey = "a{b}"
	if err := b.Publish(ctxFor(t), sig); err == nil || !strings.Contains(err.Error(), "braces") {
		t.Fatalf("Publish to a{b}: %v", err)
	}
}

func TestPublishWhileRedisIsDownReturnsAWrappedError(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	b := newBroker(t, client, srv.Prefix(t), nil)
	srv.Stop(t)
	sig, _ := tasks.NewSignature("job", nil)
	sig.RoutingKey = "down"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := b.Publish(ctx, sig)
	if err == nil || !strings.Contains(err.Error(), "redisbroker:") {
		t.Fatalf("Publish with Redis down: %v, want a wrapped error", err)
	}
}

// A worker on queues [A, B] may be woken by B's token and then fill its
// only slot from A; B's token must then be put back for a worker waiting
// on B, instead of that worker sleeping until its poll period runs out.
func TestWakeUpTokenIsPassedOnWhenNotUsed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	prefix := strings.TrimSuffix(srv.Prefix(t), ":")
	cnf := (&config.Config{Redis: &config.RedisConfig{NormalTasksPollPeriod: 20000}}).WithDefaults()
	b := newBroker(t, client, prefix+":", cnf)
	ctx := ctxFor(t)

	type got struct {
		ds  []*brokers.Delivery
		err error
	}
	fetched := make(chan got, 1)
	go func() { ds, err := b.Fetch(ctx, []string{"A", "B"}, 1, nil); fetched <- got{ds, err} }()
	waitBlocked := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			info, err := client.Info(ctx, "clients").Result()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(info, fmt.Sprintf("blocked_clients:%d\r", n)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("want %d blocked clients", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitBlocked(1)
	// A task appears in A without a wake-up token (as when another
	// worker took it), then B gets a token.
	sig, _ := tasks.NewSignature("job", nil)
	sig.RoutingKey = "A"
	msg, _ := tasks.EncodeSignature(sig)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(client.HSet(ctx, prefix+":{A}:t:"+sig.UUID, "msg", msg, "state", "pending").Err())
	must(client.RPush(ctx, prefix+":{A}:pending", sig.UUID).Err())
	must(client.LPush(ctx, prefix+":{B}:notify", "1").Err())

	g := <-fetched
	if g.err != nil || len(g.ds) != 1 || g.ds[0].Signature.UUID != sig.UUID {
		t.Fatalf("fetch: %v, %v; want A's task", g.ds, g.err)
	}
	if n, err := client.LLen(ctx, prefix+":{B}:notify").Result(); err != nil || n != 1 {
		t.Fatalf("B's wake-up tokens after the fetch: %d, %v; want the token put back", n, err)
	}
}

// On one server the broker writes the backend's states under the task's
// lease.
func TestConformancePairedStandalone(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	brokertest.ExercisePaired(t, func(t *testing.T, cnf *config.Config) (brokertest.PairedBroker, backends.ContextBackend) {
		cnf.Redis.KeyPrefix = strings.TrimSuffix(srv.Prefix(t), ":")
		store := rdb.New(client, dial.Options(cnf), false)
		b := redisbroker.NewOnStore(store, redisbroker.OptionsFrom(cnf))
		be := redisbackend.NewOnStore(store, redisbackend.Options{})
		t.Cleanup(func() { _ = b.Close(); _ = be.Close(); _ = store.Close() })
		return conformant{b, client, cnf.Redis.KeyPrefix}, be
	})
}

func TestConformancePairedEmbedded(t *testing.T) {
	t.Parallel()
	engine := redistest.StartEmbedded(t)
	client := engine.Client(t)
	brokertest.ExercisePaired(t, func(t *testing.T, cnf *config.Config) (brokertest.PairedBroker, backends.ContextBackend) {
		cnf.Redis.KeyPrefix = strings.TrimSuffix(engine.Prefix(), ":")
		store := rdb.New(client, dial.Options(cnf), false)
		b := redisbroker.NewOnStore(store, redisbroker.OptionsFrom(cnf))
		be := redisbackend.NewOnStore(store, redisbackend.Options{})
		t.Cleanup(func() { _ = b.Close(); _ = be.Close(); _ = store.Close() })
		return conformant{b, client, cnf.Redis.KeyPrefix}, be
	})
}

// One broker among those fetching from a queue maintains it, term after
// term; when it dies holding its term, another takes over once the term
// ends, and due tasks are still promoted.
func TestOneElectedMaintainerPerQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	prefix := srv.Prefix(t)
	ctx := ctxFor(t)
	const q = "elected"
	key := prefix + "{" + q + "}:maintainer"
	for i := 0; i < 3; i++ {
		b := newBroker(t, client, prefix, nil)
		go func() { _, _ = b.Fetch(ctx, []string{q}, 1, nil) }() // fetching starts the queue's maintenance
	}
	waitFor(t, "a maintainer elected", func() bool { return client.Exists(ctx, key).Val() == 1 })
	first := client.Get(ctx, key).Val()

	// Two renewals of the term (its TTL goes back up) by the same holder:
	// the others stood for election meanwhile and lost.
	renewals, last := 0, client.PTTL(ctx, key).Val()
	waitFor(t, "the maintainer's term renewed twice", func() bool {
		if got := client.Get(ctx, key).Val(); got != first {
			t.Fatalf("maintainer changed from %q to %q while it was alive", first, got)
		}
		ttl := client.PTTL(ctx, key).Val()
		if ttl > last {
			renewals++
		}
		last = ttl
		return renewals >= 2
	})

	// A maintainer that dies keeps its term until it ends; then a live
	// broker takes over and promotes a due task.
	if err := client.Set(ctx, key, "a-dead-process", 500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	sig, _ := tasks.NewSignature("job", nil)
	eta := time.Now().Add(100 * time.Millisecond)
	sig.ETA = &eta
	sig.RoutingKey = q
	b := newBroker(t, client, prefix, nil) // only publishes
	if err := b.Publish(ctx, sig); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a live broker elected after the dead one's term", func() bool {
		got := client.Get(ctx, key).Val()
		return got != "" && got != "a-dead-process"
	})
	waitFor(t, "the scheduled task promoted by the new maintainer", func() bool {
		info, err := b.QueueInfo(ctx, q)
		return err == nil && info.Scheduled == 0 && info.Pending+info.Active == 1
	})
}

// waitFor polls cond until it holds, failing after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, 10*time.Second, what, cond)
}

// A broker without the password of a Redis that wants one says so: its
// errors wrap brokers.ErrAuth and name the password, whatever go-redis called
// it (NOAUTH, or "unauthenticated multibulk length" for a long command).
func TestMissingPasswordIsNamed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // its password is changed: not the shared server
	admin := srv.Client(t)
	ctx := ctxFor(t)
	if err := admin.ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Password: "s3cret"})
		defer c.Close()
		_ = c.ConfigSet(context.Background(), "requirepass", "").Err()
	})
	cnf := (&config.Config{Logger: slog.New(slog.DiscardHandler)}).WithDefaults()
	b, err := redisbroker.Dial(srv.URL(), cnf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	err = b.Publish(ctx, newSigFor("auth"))
	if !errors.Is(err, brokers.ErrAuth) || !strings.Contains(err.Error(), "password") {
		t.Fatalf("Publish without the password: %v; want an error wrapping brokers.ErrAuth that names the password", err)
	}

	good, err := redisbroker.Dial("redis://:s3cret@"+srv.Addr(), cnf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = good.Close() })
	if err := good.Publish(ctx, newSigFor("auth")); err != nil {
		t.Fatalf("Publish with the password: %v", err)
	}
}

func newSigFor(queue string) *tasks.Signature {
	sig, _ := tasks.NewSignature("job", nil)
	sig.RoutingKey = queue
	return sig
}

// With CompletedRetention an acknowledged task is kept, marked completed and
// without its lease, until the retention ends; without it, it is deleted.
func TestCompletedRetentionKeepsAcknowledgedTasks(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	ctx := ctxFor(t)
	for _, keep := range []time.Duration{0, time.Minute} {
		prefix := srv.Prefix(t)
		cnf := (&config.Config{CompletedRetention: keep}).WithDefaults()
		b := newBroker(t, client, prefix, cnf)
		sig := publishOne(t, b, "kept")
		ds, err := b.Fetch(ctx, []string{"kept"}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Ack(ctx, ds[0]); err != nil {
			t.Fatal(err)
		}
		key := prefix + "{kept}:t:" + sig.UUID
		fields, err := client.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if keep == 0 {
			if len(fields) != 0 {
				t.Fatalf("without retention the acknowledged task's hash is %v, want deleted", fields)
			}
			continue
		}
		if fields["state"] != "completed" || fields["lease"] != "" || fields["lease_exp"] != "" {
			t.Fatalf("kept task's hash: %v, want state completed and no lease", fields)
		}
		if ttl := client.PTTL(ctx, key).Val(); ttl <= 0 || ttl > keep {
			t.Fatalf("kept task's TTL %s, want up to %s", ttl, keep)
		}
		if n := client.ZCard(ctx, prefix+"{kept}:completed").Val(); n != 1 {
			t.Fatalf("completed zset holds %d tasks, want 1", n)
		}
	}
}
