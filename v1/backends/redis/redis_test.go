package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/v1/backends/backendtest"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func TestMain(m *testing.M) {
	os.Exit(redistest.RunMain(m))
}

// keyPrefix turns a redistest prefix ("t7-9f86d081:") into a KeyPrefix
// whose keys ("t7-9f86d081:state:...") the prefix's cleanup deletes.
func keyPrefix(prefix string) string { return strings.TrimSuffix(prefix, ":") }

// brokerOn returns a broker on the store of b, a backend newBackend made.
func brokerOn(t *testing.T, b backendtest.Backend) brokers.LeaseBroker {
	return redisbroker.NewOnStore(b.(*redisbackend.Backend).Store(), redisbroker.Options{})
}

func TestConformanceStandalone(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	backendtest.Exercise(t, func(t *testing.T, cnf *config.Config) backendtest.Backend {
		cnf.Redis.KeyPrefix = keyPrefix(srv.Prefix(t))
		b := newBackend(goredis.NewClient(&goredis.Options{Addr: srv.Addr()}), cnf, true)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}, backendtest.WithBroker(brokerOn))
}

// The store on the engine that runs it for memory:// passes the suite that
// it passes on Redis.
func TestConformanceEmbedded(t *testing.T) {
	t.Parallel()
	engine := redistest.StartEmbedded(t)
	backendtest.Exercise(t, func(t *testing.T, cnf *config.Config) backendtest.Backend {
		cnf.Redis.KeyPrefix = keyPrefix(engine.Prefix())
		b := newBackend(engine.Client(t), cnf, false)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}, backendtest.WithBroker(brokerOn))
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.SharedCluster(t)
	backendtest.Exercise(t, func(t *testing.T, cnf *config.Config) backendtest.Backend {
		cnf.Redis.KeyPrefix = keyPrefix(cluster.Prefix(t))
		b := newBackend(cluster.Client(t), cnf, false)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}, backendtest.WithBroker(brokerOn))
}

// commandLog is a go-redis hook that counts round trips (a command, or a
// pipeline) and remembers the commands sent.
type commandLog struct {
	mu         sync.Mutex
	roundTrips int
	cmds       [][]interface{}
}

func (l *commandLog) record(cmds ...goredis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.roundTrips++
	for _, c := range cmds {
		l.cmds = append(l.cmds, c.Args())
	}
}

// take returns the round trips and commands since the last take.
func (l *commandLog) take() (int, [][]interface{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, cmds := l.roundTrips, l.cmds
	l.roundTrips, l.cmds = 0, nil
	return n, cmds
}

func (l *commandLog) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (l *commandLog) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		l.record(cmd)
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		l.record(cmds...)
		return next(ctx, cmds)
	}
}

// standalone returns a backend on the shared server with its own key
// prefix, a client for inspecting the keys, and the prefix.
func standalone(t *testing.T, cnf config.Config) (*redisbackend.Backend, *goredis.Client, string) {
	t.Helper()
	srv := redistest.Shared(t)
	prefix := keyPrefix(srv.Prefix(t))
	cnf.Redis = &config.RedisConfig{KeyPrefix: prefix}
	rdb := srv.Client(t)
	b := newBackend(rdb, &cnf, false)
	t.Cleanup(func() { _ = b.Close() })
	return b, rdb, prefix
}

// newGroup returns n signatures of one fresh group.
func newGroup(n int) (string, []*tasks.Signature) {
	groupUUID := "group_" + uuid.NewString()
	sigs := make([]*tasks.Signature, n)
	for i := range sigs {
		sigs[i] = &tasks.Signature{UUID: "task_" + uuid.NewString(), Name: "member", GroupUUID: groupUUID, GroupTaskCount: n}
	}
	return groupUUID, sigs
}

func uuids(sigs []*tasks.Signature) []string {
	out := make([]string, len(sigs))
	for i, s := range sigs {
		out[i] = s.UUID
	}
	return out
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Every SetState* is one round trip, group members included; SetStatePending
// takes one per 1000 signatures.
func TestSetStateIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	prefix := keyPrefix(srv.Prefix(t))
	rdb := srv.Client(t)
	log := &commandLog{}
	rdb.AddHook(log)
	b := newBackend(rdb, &config.Config{Redis: &config.RedisConfig{KeyPrefix: prefix}}, false)
	defer b.Close()
	ctx := context.Background()

	// Warm up: the connection, and the scripts loaded once per backend
	// (get_state.lua by the first read, which loads it when Redis has it
	// not: a round trip more).
	warm, warmSigs := newGroup(1)
	must(t, "warm-up", b.SetStateSuccessContext(ctx, warmSigs[0], nil))
	if _, err := b.GetStateContext(ctx, warmSigs[0].UUID); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	must(t, "warm-up", b.PurgeGroupMetaContext(ctx, warm))

	group, members := newGroup(2)
	sig := &tasks.Signature{UUID: "task_" + uuid.NewString(), Name: "plain"}
	many := func(n int) []*tasks.Signature {
		sigs := make([]*tasks.Signature, n)
		for i := range sigs {
			sigs[i] = &tasks.Signature{UUID: "task_" + uuid.NewString(), Name: "many"}
		}
		return sigs
	}
	for _, tc := range []struct {
		name       string
		write      func() error
		roundTrips int
		cmds       int
	}{
		// PENDING makes the state: created_at goes in the same HSET.
		{"pending", func() error { return b.SetStatePendingContext(ctx, sig) }, 1, 2},
		{"pending 1000", func() error { return b.SetStatePendingContext(ctx, many(1000)...) }, 1, 2000},
		{"pending 2500", func() error { return b.SetStatePendingContext(ctx, many(2500)...) }, 3, 5000},
		// A state that is not final is one script, which writes it unless
		// the state is final (set_state.lua).
		{"received", func() error { return b.SetStateReceivedContext(ctx, sig) }, 1, 1},
		// STARTED is queued without waiting; the read after it, through
		// the same ordered batcher, sees it (the read itself is the 2nd
		// command; both may share one round trip).
		{"started, then read", func() error {
			if err := b.SetStateStartedContext(ctx, sig); err != nil {
				return err
			}
			st, err := b.GetStateContext(ctx, sig.UUID)
			if err == nil && st.State != tasks.StateStarted {
				err = fmt.Errorf("read after SetStateStarted saw %s", st.State)
			}
			return err
		}, -1, 2},
		{"retry", func() error { return b.SetStateRetryContext(ctx, sig) }, 1, 1},
		// A final state is written, and told to the results waiting on
		// it, by set_state.lua.
		{"success", func() error {
			return b.SetStateSuccessContext(ctx, sig, []*tasks.TaskResult{{Type: "int64", Value: int64(1)}})
		}, 1, 1},
		{"failure", func() error { return b.SetStateFailureContext(ctx, sig, "no") }, 1, 1},
		{"started group member, then read", func() error {
			if err := b.SetStateStartedContext(ctx, members[0]); err != nil {
				return err
			}
			_, err := b.GetStateContext(ctx, members[0].UUID)
			return err
		}, -1, 2},
		{"success group member", func() error { return b.SetStateSuccessContext(ctx, members[0], nil) }, 1, 2},
		{"failure group member", func() error { return b.SetStateFailureContext(ctx, members[1], "no") }, 1, 2},
	} {
		log.take()
		must(t, tc.name, tc.write())
		n, cmds := log.take()
		if tc.roundTrips < 0 && n >= 1 && n <= 2 {
			n = tc.roundTrips // one or two: the queued write may go alone
		}
		if n != tc.roundTrips || len(cmds) != tc.cmds {
			t.Errorf("%s: %d round trips, %d commands %v; want %d round trips, %d commands", tc.name, n, len(cmds), firstNames(cmds, 8), tc.roundTrips, tc.cmds)
		}
	}
	if done, err := b.GroupCompletedContext(ctx, group, 2); !done || err != nil {
		t.Fatalf("GroupCompleted after both members were recorded: %t, %v; want true", done, err)
	}
}

func firstNames(cmds [][]interface{}, n int) []string {
	var out []string
	for i, c := range cmds {
		if i == n {
			out = append(out, "...")
			break
		}
		out = append(out, fmt.Sprint(c[0]))
	}
	return out
}

// State keys carry the TTL ResultsExpireIn, refreshed by every write.
func TestStateKeysExpire(t *testing.T) {
	t.Parallel()
	b, rdb, prefix := standalone(t, config.Config{ResultsExpireIn: 120})
	ctx := context.Background()
	sig := &tasks.Signature{UUID: "task_" + uuid.NewString(), Name: "ttl"}
	key := prefix + ":state:" + sig.UUID
	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"pending", func() error { return b.SetStatePendingContext(ctx, sig) }},
		{"received", func() error { return b.SetStateReceivedContext(ctx, sig) }},
		{"started", func() error {
			// Queued without waiting; a read through the backend follows it.
			if err := b.SetStateStartedContext(ctx, sig); err != nil {
				return err
			}
			_, err := b.GetStateContext(ctx, sig.UUID)
			return err
		}},
		{"retry", func() error { return b.SetStateRetryContext(ctx, sig) }},
		{"success", func() error { return b.SetStateSuccessContext(ctx, sig, nil) }},
		{"failure", func() error { return b.SetStateFailureContext(ctx, sig, "no") }},
	} {
		must(t, tc.name, rdb.Persist(ctx, key).Err()) // so that the write must set it
		must(t, tc.name, tc.write())
		ttl, err := rdb.PTTL(ctx, key).Result()
		must(t, "PTTL", err)
		if ttl <= 0 || ttl > 120*time.Second {
			t.Errorf("%s: PTTL of %s = %s, want within (0, 120s]", tc.name, key, ttl)
		}
	}
}

// created_at keeps the time of the first write: when the task was sent.
func TestCreatedAtIsTheFirstWrite(t *testing.T) {
	t.Parallel()
	b, _, _ := standalone(t, config.Config{})
	ctx := context.Background()
	sig := &tasks.Signature{UUID: "task_" + uuid.NewString(), Name: "created"}
	must(t, "SetStatePending", b.SetStatePendingContext(ctx, sig))
	sent, err := b.GetStateContext(ctx, sig.UUID)
	must(t, "GetState", err)
	<-time.After(5 * time.Millisecond) // so that a later write has a later time
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sig, nil))
	done, err := b.GetStateContext(ctx, sig.UUID)
	must(t, "GetState", err)
	if !done.IsSuccess() || !done.CreatedAt.Equal(sent.CreatedAt) {
		t.Fatalf("after SUCCESS: %s created %s; want SUCCESS created %s (the PENDING write)", done.State, done.CreatedAt, sent.CreatedAt)
	}
}

// A group's keys live the safety TTL while members are unfinished, and
// ResultsExpireIn once the group is complete.
func TestGroupKeysExpire(t *testing.T) {
	t.Parallel()
	const expireIn = 60 * time.Second
	b, rdb, prefix := standalone(t, config.Config{ResultsExpireIn: int(expireIn / time.Second)})
	ctx := context.Background()

	pttls := func(groupUUID string) map[string]time.Duration {
		t.Helper()
		out := make(map[string]time.Duration)
		for _, suffix := range []string{"group", "done", "order"} {
			key := prefix + ":{" + groupUUID + "}:" + suffix
			ttl, err := rdb.PTTL(ctx, key).Result()
			must(t, "PTTL", err)
			out[suffix] = ttl
		}
		return out
	}
	wantTTL := func(what, groupUUID string, keys []string, lo, hi time.Duration) {
		t.Helper()
		got := pttls(groupUUID)
		for _, k := range keys {
			if got[k] <= lo || got[k] > hi {
				t.Fatalf("%s: PTTL of the %s key = %s, want within (%s, %s]", what, k, got[k], lo, hi)
			}
		}
	}
	safety := redisbackend.GroupSafetyTTL

	for _, initialised := range []bool{true, false} {
		groupUUID, sigs := newGroup(3)
		what := "implicit group"
		if initialised {
			what = "group"
			must(t, "InitGroup", b.InitGroupContext(ctx, groupUUID, uuids(sigs)))
			wantTTL(what+" after InitGroup", groupUUID, []string{"group"}, safety-time.Minute, safety)
		}
		must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[0], nil))
		wantTTL(what+" with 1 of 3 finished", groupUUID, []string{"group", "done", "order"}, safety-time.Minute, safety)
		must(t, "SetStateFailure", b.SetStateFailureContext(ctx, sigs[1], "no"))
		wantTTL(what+" with 2 of 3 finished", groupUUID, []string{"group", "done", "order"}, safety-time.Minute, safety)
		must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[2], nil))
		wantTTL(what+" complete", groupUUID, []string{"group", "done", "order"}, 0, expireIn)
		won, err := b.TriggerChordContext(ctx, groupUUID, sigs[2].UUID)
		if !won || err != nil {
			t.Fatalf("TriggerChord: %t, %v; want true", won, err)
		}
		wantTTL(what+" complete, chord triggered", groupUUID, []string{"group", "done", "order"}, 0, expireIn)
	}
}

// GroupCompleted is one O(1) round trip: it reads no member's state, nor
// the recorded states, however large the group.
func TestGroupCompletedReadsNoMemberState(t *testing.T) {
	t.Parallel()
	const members = 1000
	srv := redistest.Shared(t)
	prefix := keyPrefix(srv.Prefix(t))
	rdb := srv.Client(t)
	log := &commandLog{}
	rdb.AddHook(log)
	b := newBackend(rdb, &config.Config{Redis: &config.RedisConfig{KeyPrefix: prefix}}, false)
	defer b.Close()
	ctx := context.Background()

	groupUUID, sigs := newGroup(members)
	must(t, "InitGroup", b.InitGroupContext(ctx, groupUUID, uuids(sigs)))
	var wg sync.WaitGroup
	errs := make(chan error, members)
	for w := 0; w < 16; w++ {
		wg.Go(func() {
			for i := w; i < members; i += 16 {
				errs <- b.SetStateSuccessContext(ctx, sigs[i], []*tasks.TaskResult{{Type: "int", Value: i}})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, "SetStateSuccess", err)
	}

	for _, tc := range []struct {
		count int
		want  bool
	}{{members, true}, {members + 1, false}} {
		log.take()
		done, err := b.GroupCompletedContext(ctx, groupUUID, tc.count)
		must(t, "GroupCompleted", err)
		if done != tc.want {
			t.Fatalf("GroupCompleted(%d) with %d finished = %t, want %t", tc.count, members, done, tc.want)
		}
		n, cmds := log.take()
		if n != 1 || len(cmds) > 2 {
			t.Fatalf("GroupCompleted: %d round trips, %d commands %v; want 1 round trip of at most 2 commands", n, len(cmds), cmds)
		}
		for _, c := range cmds {
			name := strings.ToLower(fmt.Sprint(c[0]))
			key := fmt.Sprint(c[1])
			if strings.Contains(key, ":state:") || !strings.Contains(key, "{"+groupUUID+"}") ||
				(name != "hlen" && name != "exists") {
				t.Fatalf("GroupCompleted sent %v; want only HLEN / EXISTS of the group's keys", c)
			}
		}
	}
}

// 100 members, asking at once through 4 clients (as 4 processes would),
// elect exactly one on Redis Cluster.
func TestTriggerChordOnceOnCluster(t *testing.T) {
	t.Parallel()
	const members, processes = 100, 4
	cluster := redistest.SharedCluster(t)
	prefix := keyPrefix(cluster.Prefix(t))
	ctx := context.Background()
	backends := make([]*redisbackend.Backend, processes)
	for i := range backends {
		backends[i] = newBackend(goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs()}),
			&config.Config{Redis: &config.RedisConfig{KeyPrefix: prefix}}, true)
		defer backends[i].Close()
	}
	groupUUID, sigs := newGroup(members)
	must(t, "InitGroup", backends[0].InitGroupContext(ctx, groupUUID, uuids(sigs)))

	var (
		mu      sync.Mutex
		winners []string
		errs    []error
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for i, sig := range sigs {
		b := backends[i%processes]
		wg.Go(func() {
			<-start
			won, err := b.TriggerChordContext(ctx, groupUUID, sig.UUID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if won {
				winners = append(winners, sig.UUID)
			}
		})
	}
	close(start)
	wg.Wait()
	if errs != nil {
		t.Fatalf("TriggerChord: %v", errors.Join(errs...))
	}
	if len(winners) != 1 {
		t.Fatalf("%d of %d concurrent members won TriggerChord, want exactly 1", len(winners), members)
	}
	for _, b := range backends {
		if won, err := b.TriggerChordContext(ctx, groupUUID, winners[0]); !won || err != nil {
			t.Fatalf("TriggerChord again by the winner: %t, %v; want true", won, err)
		}
	}
	rdb := cluster.Client(t)
	trig, err := rdb.HGet(ctx, prefix+":{"+groupUUID+"}:group", "trig").Result()
	must(t, "HGET trig", err)
	if trig != winners[0] {
		t.Fatalf("trig = %q, want the winner %q", trig, winners[0])
	}
}

// Results stored as JSON come back, through tasks.ReflectTaskResults, equal
// to what the task returned; from GetState and from GroupTaskStates.
func TestResultsRoundTrip(t *testing.T) {
	t.Parallel()
	b, _, _ := standalone(t, config.Config{})
	ctx := context.Background()
	values := []struct {
		typ   string
		value interface{}
	}{
		{"int64", int64(math.MaxInt64)},
		{"int64", int64(math.MinInt64)},
		{"float64", 0.1},
		{"float64", math.MaxFloat64},
		{"float64", -1.5e-300},
		{"string", "héllo \"world\"\n"},
		{"string", ""},
		{"[]string", []string{"a", "", "ç"}},
		{"[]uint8", []byte{0, 1, 2, 254, 255}},
		{"[]byte", []byte("bytes")},
	}
	results := make([]*tasks.TaskResult, len(values))
	for i, v := range values {
		results[i] = &tasks.TaskResult{Type: v.typ, Value: v.value}
	}
	groupUUID, sigs := newGroup(1)
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[0], results))

	st, err := b.GetStateContext(ctx, sigs[0].UUID)
	must(t, "GetState", err)
	sts, err := b.GroupTaskStatesContext(ctx, groupUUID, 1)
	must(t, "GroupTaskStates", err)
	for from, got := range map[string][]*tasks.TaskResult{"GetState": st.Results, "GroupTaskStates": sts[0].Results} {
		reflected, err := tasks.ReflectTaskResults(got)
		must(t, "ReflectTaskResults from "+from, err)
		if len(reflected) != len(values) {
			t.Fatalf("%s: %d results, want %d", from, len(reflected), len(values))
		}
		for i, v := range values {
			if g := reflected[i].Interface(); !reflect.DeepEqual(g, v.value) {
				t.Errorf("%s: result %d (%s) = %#v, want %#v", from, i, v.typ, g, v.value)
			}
		}
	}
}

// A result JSON cannot encode fails the write, and nothing is written.
func TestUnencodableResultWritesNothing(t *testing.T) {
	t.Parallel()
	b, _, _ := standalone(t, config.Config{})
	ctx := context.Background()
	groupUUID, sigs := newGroup(1)
	err := b.SetStateSuccessContext(ctx, sigs[0], []*tasks.TaskResult{{Type: "float64", Value: math.NaN()}})
	if err == nil || !strings.Contains(err.Error(), sigs[0].UUID) {
		t.Fatalf("SetStateSuccess of NaN: err = %v, want an error naming the task", err)
	}
	if _, err := b.GetStateContext(ctx, sigs[0].UUID); !errors.Is(err, backends.ErrStateNotFound) {
		t.Fatalf("GetState after a failed write: %v, want ErrStateNotFound", err)
	}
	if _, err := b.GroupTaskStatesContext(ctx, groupUUID, 1); !errors.Is(err, backends.ErrGroupNotFound) {
		t.Fatalf("GroupTaskStates after a failed write: %v, want ErrGroupNotFound", err)
	}
}

// A member recorded after Redis lost the scripts (SCRIPT FLUSH, a restart)
// is still recorded: the backend loads the script again.
func TestGroupRecordSurvivesScriptFlush(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // SCRIPT FLUSH reaches beyond a test's keys
	rdb := srv.Client(t)
	b := newBackend(rdb, &config.Config{}, false)
	defer b.Close()
	ctx := context.Background()
	groupUUID, sigs := newGroup(2)
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[0], nil))
	must(t, "SCRIPT FLUSH", rdb.ScriptFlush(ctx).Err())
	must(t, "SetStateSuccess after SCRIPT FLUSH", b.SetStateSuccessContext(ctx, sigs[1], nil))
	if done, err := b.GroupCompletedContext(ctx, groupUUID, 2); !done || err != nil {
		t.Fatalf("GroupCompleted: %t, %v; want true", done, err)
	}
}

// Errors wrap the sentinels, name what they are about, and never carry
// redis.Nil.
func TestErrors(t *testing.T) {
	t.Parallel()
	b, _, _ := standalone(t, config.Config{})
	ctx := context.Background()
	missing := "task_" + uuid.NewString()
	_, err := b.GetStateContext(ctx, missing)
	if !errors.Is(err, backends.ErrStateNotFound) || errors.Is(err, goredis.Nil) ||
		!strings.HasPrefix(err.Error(), "redisbackend: ") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("GetState of a missing task: %v; want a redisbackend error naming it, wrapping ErrStateNotFound", err)
	}
	group := "group_" + uuid.NewString()
	if _, err := b.GroupTaskStatesContext(ctx, group, 1); !errors.Is(err, backends.ErrGroupNotFound) || !strings.Contains(err.Error(), group) {
		t.Fatalf("GroupTaskStates of a missing group: %v", err)
	}
	if _, err := b.TriggerChordContext(ctx, group, "task_x"); !errors.Is(err, backends.ErrGroupNotFound) || !strings.Contains(err.Error(), group) {
		t.Fatalf("TriggerChord of a missing group: %v", err)
	}
	if err := b.InitGroupContext(ctx, "", nil); !errors.Is(err, tasks.ErrEmptyGroupUUID) {
		t.Fatalf("InitGroup without a group UUID: %v, want ErrEmptyGroupUUID", err)
	}
	braces := &tasks.Signature{UUID: "task_" + uuid.NewString(), Name: "n", GroupUUID: "a}b", GroupTaskCount: 1}
	if err := b.SetStateSuccessContext(ctx, braces, nil); err == nil || !strings.Contains(err.Error(), "braces") {
		t.Fatalf("SetStateSuccess of a member of group %q: %v, want an error about braces", braces.GroupUUID, err)
	}
}

// Close closes the client only when the backend owns it.
func TestCloseOwnsClient(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	ctx := context.Background()
	for _, owns := range []bool{true, false} {
		rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
		b := newBackend(rdb, nil, owns)
		must(t, "Close", b.Close())
		must(t, "second Close", b.Close())
		err := rdb.Ping(ctx).Err()
		if owns && !errors.Is(err, goredis.ErrClosed) {
			t.Fatalf("Ping after Close of a backend owning the client: %v, want ErrClosed", err)
		}
		if !owns {
			must(t, "Ping after Close of a backend not owning the client", err)
			_ = rdb.Close()
		}
	}
}
