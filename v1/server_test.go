package machinery_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/syncbuf"
	"github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func TestMain(m *testing.M) {
	os.Exit(redistest.RunMain(m))
}

func newServer(t *testing.T, cnf *config.Config) *machinery.Server {
	t.Helper()
	if cnf == nil {
		cnf = &config.Config{Broker: "memory://"}
	}
	cnf.Logger = slog.New(slog.DiscardHandler)
	s, err := machinery.NewServer(cnf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// launch starts w and returns a wait for its end, which fails the test
// when the worker has not stopped a minute after it is called.
func launch(t *testing.T, w *machinery.Worker) (wait func() error) {
	t.Helper()
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	return func() error {
		t.Helper()
		select {
		case err := <-errs:
			return err
		case <-time.After(time.Minute):
			t.Fatal("the worker had not stopped a minute after it was told to")
			return nil
		}
	}
}

// started waits for w to start, failing the test after a minute.
func started(t *testing.T, w *machinery.Worker) {
	t.Helper()
	select {
	case <-w.Started():
	case <-time.After(time.Minute):
		t.Fatal("the worker had not started after a minute")
	}
}

func TestNewServerRefusesBadConfigNamingTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cnf   config.Config
		field string
	}{
		{config.Config{Broker: "amqp://guest:secret@localhost"}, "Broker"},
		{config.Config{Broker: "memory://", ResultBackend: "mongodb://x"}, "ResultBackend"},
		{config.Config{Broker: "memory://", ResultsExpireIn: -5}, "ResultsExpireIn"},
		{config.Config{Broker: "memory://", LeaseDuration: 10}, "LeaseDuration"},
		{config.Config{Broker: "memory://", LeaseRenewInterval: config.DefaultLeaseDuration}, "LeaseRenewInterval"},
		{config.Config{Broker: "memory://", DefaultQueue: "a{b"}, "DefaultQueue"},
		// Refused before anything is dialled: the URL cannot be used.
		{config.Config{Broker: "redis://:secret@localhost:notaport"}, "Broker"},
		{config.Config{Broker: "redis://[::1"}, "Broker"},
		{config.Config{Broker: "memory://", ResultBackend: "redis://localhost:0"}, "ResultBackend"},
	} {
		_, err := machinery.NewServer(&tc.cnf)
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: got %v, want ErrInvalid naming %s", tc.cnf, err, tc.field)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("error shows a password: %v", err)
		}
	}
}

// With Redis down, a send's error says which address it could not
// reach, and nothing of the steps under way (no shards were configured).
func TestSendToUnreachableRedisSaysWhere(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: a connection is refused
	client := goredis.NewClient(&goredis.Options{Addr: addr, Password: "secret", MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { client.Close() })
	s, err := machinery.NewServerWithRedisClient(&config.Config{Logger: slog.New(slog.DiscardHandler)}, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	_, err = s.SendTask(&tasks.Signature{Name: "add"})
	if err == nil {
		t.Fatal("SendTask with Redis down: nil error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "could not reach Redis at "+addr+": ") || strings.Contains(msg, "shard") || strings.Contains(msg, "secret") {
		t.Fatalf("SendTask with Redis down: %q, want it to say it could not reach Redis at %s, and nothing of shards or the password", msg, addr)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("SendTask with Redis down: %v does not wrap the dial's *net.OpError", err)
	}
}

func TestNewServerDefaults(t *testing.T) {
	t.Parallel()
	cnf := &config.Config{Broker: "memory://"}
	s := newServer(t, cnf)
	got := s.GetConfig()
	if got.ResultBackend != "memory://" || got.DefaultQueue != "machinery_tasks" || got.ResultsExpireIn != 3600 {
		t.Fatalf("defaults not applied: %+v", got)
	}
	if cnf.ResultBackend != "" || cnf.DefaultQueue != "" {
		t.Fatal("NewServer changed the caller's config")
	}
}

// A Config without a Broker (nil, from a load whose error was ignored; an
// unset BROKER; a literal that leaves it out) is refused at once, as
// machinery's NewServer refused it, with an error saying what to set;
// nothing falls back to the in-process broker.
func TestNewServerRefusesAMissingBroker(t *testing.T) {
	for _, k := range []string{"BROKER", "RESULT_BACKEND"} {
		t.Setenv(k, "") // restored at Cleanup
		os.Unsetenv(k)
	}
	fromEnv, err := config.NewFromEnvironment()
	if err != nil {
		t.Fatalf("NewFromEnvironment() with BROKER unset = %v, want it to load", err)
	}
	for name, cnf := range map[string]*config.Config{
		"nil":                   nil,
		"empty":                 {},
		"only a result backend": {ResultBackend: "memory://", DefaultQueue: "q"},
		"BROKER unset":          fromEnv,
	} {
		s, err := machinery.NewServer(cnf)
		if err == nil {
			s.Close()
			t.Errorf("%s: NewServer = nil error, want the Broker refused", name)
			continue
		}
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: NewServer = %v, want an error wrapping config.ErrInvalid", name, err)
		}
		for _, want := range []string{"Broker", "BROKER", `"memory://"`, `"redis://host:port"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: NewServer = %q, want it to name %s", name, err, want)
			}
		}
		if cnf == nil && !strings.Contains(err.Error(), "nil *config.Config") {
			t.Errorf("nil: NewServer = %q, want it to say the Config is nil", err)
		}
	}
}

// The constructors given the broker need no Broker URL.
func TestNewServerOnAGivenBrokerNeedsNoBrokerURL(t *testing.T) {
	t.Parallel()
	base := newServer(t, nil)
	quiet := func() *config.Config { return &config.Config{Logger: slog.New(slog.DiscardHandler)} }
	s, err := machinery.NewServerWithBrokerBackend(quiet(), base.GetBroker(), base.GetBackend())
	if err != nil {
		t.Errorf("NewServerWithBrokerBackend with no Broker URL = %v", err)
	}
	_ = s // closing it would close base's broker and backend
	s = machinery.NewServerWithBrokerBackendLock(quiet(), base.GetBroker(), base.GetBackend(), nil)
	if _, err := s.SendTask(&tasks.Signature{Name: "none"}); err != nil {
		t.Errorf("a Server of NewServerWithBrokerBackendLock with no Broker URL: SendTask = %v", err)
	}

	srv := redistest.Shared(t)
	cnf := quiet()
	cnf.Redis = &config.RedisConfig{KeyPrefix: strings.TrimSuffix(srv.Prefix(t), ":")}
	rs, err := machinery.NewServerWithRedisClient(cnf, srv.Client(t))
	if err != nil {
		t.Fatalf("NewServerWithRedisClient with no Broker URL = %v", err)
	}
	t.Cleanup(func() { rs.Close() })
}

func TestRegisterTaskRejectsBadFunctions(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, tc := range []struct {
		name string
		fn   interface{}
		want error
	}{
		{"not_a_func", 42, tasks.ErrTaskMustBeFunc},
		{"nil", nil, tasks.ErrTaskMustBeFunc},
		{"no_return", func() {}, tasks.ErrTaskReturnsNoValue},
		{"last_not_error", func() (int, string) { return 0, "" }, tasks.ErrLastReturnValueMustBeError},
		{"", func() error { return nil }, tasks.ErrEmptyTaskName},
	} {
		err := s.RegisterTask(tc.name, tc.fn)
		if !errors.Is(err, tc.want) {
			t.Errorf("RegisterTask(%q, %T): %v, want %v", tc.name, tc.fn, err, tc.want)
		}
		if tc.name != "" && s.IsTaskRegistered(tc.name) {
			t.Errorf("%q registered despite the error", tc.name)
		}
	}
	// RegisterTasks is all or nothing.
	err := s.RegisterTasks(map[string]interface{}{"good": func() error { return nil }, "bad": 1})
	if err == nil || s.IsTaskRegistered("good") {
		t.Fatalf("RegisterTasks with one bad function: err %v, good registered %v", err, s.IsTaskRegistered("good"))
	}
}

func TestRegisteredTasks(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	if err := s.RegisterTasks(map[string]interface{}{"b": func() error { return nil }, "a": func() error { return nil }}); err != nil {
		t.Fatal(err)
	}
	if got := s.GetRegisteredTaskNames(); strings.Join(got, ",") != "a,b" {
		t.Fatalf("names %v", got)
	}
	if _, err := s.GetRegisteredTask("missing"); !errors.Is(err, machinery.ErrTaskNotRegistered) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("GetRegisteredTask(missing): %v", err)
	}
}

func TestSendRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	ctx := context.Background()
	if _, err := s.SendTask(nil); !errors.Is(err, tasks.ErrNilSignature) {
		t.Errorf("SendTask(nil): %v", err)
	}
	if _, err := s.SendTask(&tasks.Signature{}); !errors.Is(err, tasks.ErrEmptyTaskName) {
		t.Errorf("SendTask(no name): %v", err)
	}
	if _, err := s.SendChainWithContext(ctx, &tasks.Chain{}); !errors.Is(err, tasks.ErrEmptyWorkflow) {
		t.Errorf("empty chain: %v", err)
	}
	if _, err := s.SendChainWithContext(ctx, nil); !errors.Is(err, tasks.ErrEmptyWorkflow) {
		t.Errorf("nil chain: %v", err)
	}
	if _, err := s.SendGroupWithContext(ctx, &tasks.Group{GroupUUID: "group_x"}, 0); !errors.Is(err, tasks.ErrEmptyWorkflow) {
		t.Errorf("empty group: %v", err)
	}
	if _, err := s.SendGroupWithContext(ctx, &tasks.Group{GroupUUID: "group_x", Tasks: []*tasks.Signature{nil}}, 0); !errors.Is(err, tasks.ErrNilSignature) {
		t.Errorf("group with a nil task: %v", err)
	}
	if _, err := s.SendChordWithContext(ctx, &tasks.Chord{}, 0); !errors.Is(err, tasks.ErrEmptyWorkflow) {
		t.Errorf("empty chord: %v", err)
	}
	g, _ := tasks.NewGroup(&tasks.Signature{Name: "a"})
	if _, err := s.SendChordWithContext(ctx, &tasks.Chord{Group: g}, 0); !errors.Is(err, tasks.ErrNilSignature) {
		t.Errorf("chord without callback: %v", err)
	}
	if _, err := tasks.NewGroup(); !errors.Is(err, tasks.ErrEmptyWorkflow) {
		t.Errorf("NewGroup(): %v", err)
	}
}

func TestEagerRunsInsideSendTask(t *testing.T) {
	t.Parallel()
	s := newServer(t, &config.Config{Broker: "eager", ResultBackend: "eager"})
	s.RegisterTask("double", func(n int64) (int64, error) { return 2 * n, nil })
	r, err := s.SendTask(&tasks.Signature{Name: "double", Args: []tasks.Arg{{Type: "int64", Value: 21}}})
	if err != nil {
		t.Fatal(err)
	}
	// Final before any wait.
	if st := r.GetState(); st.State != tasks.StateSuccess {
		t.Fatalf("state right after SendTask: %s, want SUCCESS", st.State)
	}
	out, err := r.Touch()
	if err != nil || len(out) != 1 || out[0].Int() != 42 {
		t.Fatalf("Touch: %v, %v", out, err)
	}
}

func TestNewServerWithRedisClient(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	s, err := machinery.NewServerWithRedisClient(&config.Config{
		Logger:        slog.New(slog.DiscardHandler),
		NoUnixSignals: true,
		Redis:         &config.RedisConfig{KeyPrefix: strings.TrimSuffix(srv.Prefix(t), ":")},
	}, client)
	if err != nil {
		t.Fatal(err)
	}
	s.RegisterTask("double", func(n int64) (int64, error) { return 2 * n, nil })
	w := s.NewWorker("w", 2)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "double", Args: []tasks.Arg{{Type: "int64", Value: 21}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.GetWithContext(ctx, time.Millisecond)
	if err != nil || len(out) != 1 || out[0].Int() != 42 {
		t.Fatalf("Get: %v, %v", out, err)
	}
	w.Quit()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The caller's client stays open.
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("the caller's client after Close: %v", err)
	}
}

// In eager mode a task that asks to be retried runs again in a loop, not a
// recursion (machinery's recursed until the stack overflowed): every run
// sees the same stack depth.
func TestEagerRetriesLoopNotRecurse(t *testing.T) {
	t.Parallel()
	s := newServer(t, &config.Config{Broker: "eager", ResultBackend: "eager"})
	const runs = 20
	var depths []int
	s.RegisterTask("again", func() error {
		depths = append(depths, runtime.Callers(0, make([]uintptr, 4096)))
		if len(depths) < runs {
			return tasks.NewErrRetryTaskLater("not yet", 0)
		}
		return nil
	})
	r, err := s.SendTask(&tasks.Signature{Name: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if st := r.GetState(); st.State != tasks.StateSuccess {
		t.Fatalf("state after SendTask: %s, want SUCCESS", st.State)
	}
	if len(depths) != runs {
		t.Fatalf("task ran %d times, want %d", len(depths), runs)
	}
	for i, d := range depths {
		if d != depths[0] {
			t.Fatalf("run %d at stack depth %d, run 1 at %d: retries recurse", i+1, d, depths[0])
		}
	}
}

// A worker's first line names the broker and backend its Server uses,
// once, with the password redacted.
func TestWorkerLogsBrokerAndBackendOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	user := "logs_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	admin := srv.Client(t)
	if err := admin.Do(context.Background(), "ACL", "SETUSER", user, "on", ">s3cret", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	var logs syncbuf.Buffer
	u := "redis://" + user + ":s3cret@" + srv.Addr()
	s, err := machinery.NewServer(&config.Config{Broker: u, ResultBackend: u, NoUnixSignals: true,
		Redis:  &config.RedisConfig{KeyPrefix: strings.TrimSuffix(srv.Prefix(t), ":")},
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	w := s.NewWorker("w1", 1)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	<-w.Started()
	w.Quit()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Contains(out, "s3cret") {
		t.Fatalf("the logs show the password:\n%s", out)
	}
	var found int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["broker"] == nil && rec["result_backend"] == nil {
			continue
		}
		found++
		want := "redis://***@" + srv.Addr()
		if rec["broker"] != want || rec["result_backend"] != want {
			t.Errorf("log line %s: want broker and result_backend %s", line, want)
		}
	}
	if found != 1 {
		t.Fatalf("%d log lines name the broker, want 1:\n%s", found, out)
	}
}

// A task whose message is over MaxMessageSize is refused when it is sent,
// naming both sizes, and nothing of it is written; a task whose results
// would make its chain's next step too large fails once, with the reason,
// rather than being run again.
func TestMessageOverMaxMessageSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, url string }{{"memory", "memory://"}, {"redis", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cnf := &config.Config{Broker: tc.url, MaxMessageSize: 4096, NoUnixSignals: true}
			if tc.url == "" {
				srv := redistest.Shared(t)
				cnf.Broker = srv.URL()
				cnf.Redis = &config.RedisConfig{KeyPrefix: strings.TrimSuffix(srv.Prefix(t), ":")}
			}
			s := newServer(t, cnf)
			ctx := context.Background()
			big := &tasks.Signature{Name: "echo", Args: []tasks.Arg{{Type: "string", Value: strings.Repeat("x", 8192)}}}
			_, err := s.SendTaskWithContext(ctx, big)
			var tooLarge *brokers.MessageTooLargeError
			if !errors.Is(err, brokers.ErrMessageTooLarge) || !errors.As(err, &tooLarge) ||
				!strings.Contains(err.Error(), "4096") || !strings.Contains(err.Error(), big.UUID) {
				t.Fatalf("SendTask of an 8 KiB argument with a 4 KiB limit: %v, want ErrMessageTooLarge naming the task and the limit", err)
			}
			if _, err := s.GetBackend().(backends.ContextBackend).GetStateContext(ctx, big.UUID); !errors.Is(err, backends.ErrStateNotFound) {
				t.Fatalf("state of the refused task: %v, want ErrStateNotFound (nothing written)", err)
			}

			if err := s.RegisterTasks(map[string]interface{}{
				"grow": func() (string, error) { return strings.Repeat("y", 8192), nil },
				"echo": func(s string) (string, error) { return s, nil },
			}); err != nil {
				t.Fatal(err)
			}
			w := s.NewWorker("w", 1)
			errs := make(chan error, 1)
			w.LaunchAsync(errs)
			t.Cleanup(func() { w.Quit(); <-errs })
			chain, err := tasks.NewChain(&tasks.Signature{Name: "grow"}, &tasks.Signature{Name: "echo"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.SendChainWithContext(ctx, chain); err != nil {
				t.Fatal(err)
			}
			first := result.NewAsyncResult(chain.Tasks[0], s.GetBackend())
			_, err = first.GetWithContext(ctx, 5*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), "over the limit of 4096 bytes") {
				t.Fatalf("the step whose results are too large for the next: %v, want a failure saying the message is over the limit", err)
			}
		})
	}
}

// TestMachineryPurgeStateOfAQueuedTask: as with machinery, PurgeState of
// a task still in its queue makes GetState fail, and the task still runs
// when a worker takes it. Inside it, GetState finds its state, as it finds
// machinery's RECEIVED (so a program that checks there whether its job
// was deleted, as DungBeetle does, runs it), and its result is written as
// usual.
func TestMachineryPurgeStateOfAQueuedTask(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	u := "redis://" + srv.Addr()
	s := newServer(t, &config.Config{Broker: u, ResultBackend: u, NoUnixSignals: true,
		Redis: &config.RedisConfig{KeyPrefix: strings.TrimSuffix(srv.Prefix(t), ":")}})
	inside := make(chan error, 1)
	if err := s.RegisterTask("job", func(ctx context.Context) error {
		_, err := s.GetBackend().GetState(tasks.SignatureFromContext(ctx).UUID)
		inside <- err
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sig := &tasks.Signature{UUID: "job_" + uuid.NewString(), Name: "job"}
	res, err := s.SendTask(sig)
	if err != nil {
		t.Fatal(err)
	}
	backend := s.GetBackend()
	if st, err := backend.GetState(sig.UUID); err != nil || st.State != tasks.StatePending {
		t.Fatalf("GetState of the queued task: %+v, %v; want PENDING", st, err)
	}
	if err := backend.PurgeState(sig.UUID); err != nil {
		t.Fatal(err)
	}
	if st, err := backend.GetState(sig.UUID); !errors.Is(err, backends.ErrStateNotFound) {
		t.Fatalf("GetState of the queued task after PurgeState: %+v, %v; want ErrStateNotFound", st, err)
	}

	w := s.NewWorker("w", 1)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	t.Cleanup(func() { w.Quit(); <-errs })
	select {
	case err := <-inside:
		if err != nil {
			t.Fatalf("GetState inside the purged task as it ran: %v; want its state", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the purged task did not run")
	}
	if _, err := res.GetWithTimeout(10*time.Second, time.Millisecond); err != nil {
		t.Fatalf("the result of the purged task once it ran: %v", err)
	}
	if st, err := backend.GetState(sig.UUID); err != nil || st.State != tasks.StateSuccess {
		t.Fatalf("GetState of the purged task after it ran: %+v, %v; want SUCCESS", st, err)
	}
}
