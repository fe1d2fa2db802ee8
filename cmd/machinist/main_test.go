package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/syncbuf"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

var discard = slog.New(slog.DiscardHandler)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with what the command prints")

func TestMain(m *testing.M) {
	os.Exit(redistest.RunMain(m))
}

// deployment is a Redis holding known tasks, and the configuration file
// that points the command at it.
type deployment struct {
	srv        *machinery.Server
	configPath string
	prefix     string
}

// far is the ETA of the scheduled task: a fixed time, so that it prints
// the same in every run.
var far = time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)

// newDeployment fills a Redis of the test's own prefix with: queue emails
// (three pending tasks, one scheduled, one taken by a worker that is
// listed), queue reports (paused, one archived task), queue flows (a chord
// that failed, run by a real worker that has stopped), queue digests (an
// aggregation group of two members), queue later (a chain nobody ran);
// and the workers' counts of the last minute.
func newDeployment(t *testing.T) *deployment {
	t.Helper()
	rs := redistest.Shared(t)
	d := &deployment{prefix: rs.Prefix(t)}
	d.configPath = filepath.Join(t.TempDir(), "machinist.yml")
	yml := fmt.Sprintf("broker: %s\nresult_backend: %s\ndefault_queue: emails\nlease_duration: 1h\nredis:\n  key_prefix: %q\n",
		rs.URL(), rs.URL(), strings.TrimSuffix(d.prefix, ":"))
	if err := os.WriteFile(d.configPath, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	cnf, err := config.NewFromYaml(d.configPath, false)
	if err != nil {
		t.Fatal(err)
	}
	cnf.NoUnixSignals = true
	cnf.Logger = discard
	srv, err := machinery.NewServer(cnf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	d.srv = srv
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	send := func(sig *tasks.Signature) {
		t.Helper()
		_, err := srv.SendTaskWithContext(ctx, sig)
		must(err)
	}
	mail := func(id, to string) *tasks.Signature {
		return &tasks.Signature{UUID: id, Name: "send", RoutingKey: "emails",
			Args: []tasks.Arg{{Type: "string", Value: to}, {Type: "int64", Value: 1}}}
	}

	// emails: a task taken by a worker (listed below), three pending, one
	// scheduled.
	send(mail("task_running", "ops@example.com"))
	b := srv.GetBroker().(brokers.LeaseBroker)
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	taken, err := b.Fetch(fctx, []string{"emails"}, 1, nil)
	cancel()
	must(err)
	if len(taken) != 1 || taken[0].Signature.UUID != "task_running" {
		t.Fatalf("fetched %v, want task_running", taken)
	}
	// It has reported its progress, as tasks.SetProgress has its worker
	// write it.
	progress, err := json.Marshal(tasks.Progress{Done: 3, Total: 4, Message: "sending", At: time.Now()})
	must(err)
	must(b.(store.TaskData).WriteTaskData(ctx, taken[0], map[string][]byte{store.ProgressKey: progress}))
	for i, to := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		send(mail(fmt.Sprintf("task_p%d", i+1), to))
	}
	later := mail("task_s1", "d@example.com")
	later.ETA = &far
	send(later)

	// reports: paused, with an archived task.
	send(&tasks.Signature{UUID: "task_a1", Name: "render", RoutingKey: "reports"})
	in := b.(brokers.Inspector)
	_, err = in.TakeWaiting(ctx, "reports", "task_a1", brokers.TakeArchive, "printer on fire")
	must(err)
	must(b.(brokers.Pauser).PauseQueue(ctx, "reports"))

	// flows: a chord whose second member fails, run by a real worker.
	must(srv.RegisterTasks(map[string]interface{}{
		"add":  func(a, b int64) (int64, error) { return a + b, nil },
		"fail": func() error { return errors.New("disk full") },
		"sum":  func(xs ...int64) (int64, error) { return 0, nil },
	}))
	members := []*tasks.Signature{
		{UUID: "task_m1", Name: "add", RoutingKey: "flows", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}}},
		{UUID: "task_m2", Name: "fail", RoutingKey: "flows"},
		{UUID: "task_m3", Name: "add", RoutingKey: "flows", Args: []tasks.Arg{{Type: "int64", Value: 3}, {Type: "int64", Value: 4}}},
	}
	group, err := tasks.NewGroup(members...)
	must(err)
	group.GroupUUID = "group_chord"
	for _, m := range members {
		m.GroupUUID = "group_chord"
	}
	chord, err := tasks.NewChord(group, &tasks.Signature{UUID: "task_sum", Name: "sum", RoutingKey: "flows"})
	must(err)
	_, err = srv.SendChordWithContext(ctx, chord, 0)
	must(err)
	w := srv.NewCustomQueueWorker("flows-worker", 3, "flows")
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := srv.GetBackend().(backends.ContextBackend).GetStateContext(ctx, "task_sum")
		if err == nil && st.IsCompleted() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chord's callback did not fail within 20s: %v, %v", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// flows: a DAG whose node b fails, allowed to, also run by it.
	failing := &tasks.Signature{UUID: "task_g2", Name: "fail", RoutingKey: "flows", Immutable: true}
	dag, err := tasks.NewDAG("report").
		Add("a", &tasks.Signature{UUID: "task_g1", Name: "add", RoutingKey: "flows", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}}}).
		Add("b", tasks.AllowFailure(failing), "a").
		Add("c", &tasks.Signature{UUID: "task_g3", Name: "add", RoutingKey: "flows", Args: []tasks.Arg{{Type: "int64", Value: 10}}}, "a").
		Add("d", &tasks.Signature{UUID: "task_g4", Name: "sum", RoutingKey: "flows"}, "b", "c").
		Build()
	must(err)
	dagResult, err := srv.SendWorkflowWithContext(ctx, dag)
	must(err)
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = dagResult.GetWithContext(waitCtx, 5*time.Millisecond)
	must(err)
	w.Quit()
	if err := <-errs; err != nil {
		t.Fatalf("worker: %v", err)
	}
	// task_m1 emitted two events as it ran (tasks.Emit), in its first
	// attempt.
	for _, data := range []string{`"partial 1"`, `{"rows":2}`} {
		must(srv.GetBackend().(backends.Events).AppendEvent(ctx, "task_m1",
			tasks.Event{Kind: "data", Attempt: 1, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Data: []byte(data)}))
	}

	// digests: two members waiting in their aggregation group (a worker
	// announced the aggregator, for the configured hour, then stopped).
	must(srv.RegisterAggregator("notify", machinery.AggregationPolicy{MaxSize: 10, MaxDelay: time.Hour},
		func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			return &tasks.Signature{Name: "digest"}, nil
		}))
	dw := srv.NewCustomQueueWorker("digests-worker", 1, "digests")
	dw.LaunchAsync(errs)
	<-dw.Started()
	dw.Quit()
	if err := <-errs; err != nil {
		t.Fatalf("worker: %v", err)
	}
	for i := range 2 {
		send(&tasks.Signature{UUID: fmt.Sprintf("task_n%d", i+1), Name: "notify", RoutingKey: "digests", AggregationKey: "alice@example.com"})
	}

	// later: a chain nobody runs.
	chain, err := tasks.NewChain(
		&tasks.Signature{UUID: "task_c1", Name: "fetch", RoutingKey: "later"},
		&tasks.Signature{UUID: "task_c2", Name: "parse", RoutingKey: "later"},
		&tasks.Signature{UUID: "task_c3", Name: "store", RoutingKey: "later"},
	)
	must(err)
	_, err = srv.SendChainWithContext(ctx, chain)
	must(err)

	// A worker listed as running task_running, with counts of the last
	// minute for emails.
	mon := b.(brokers.Monitor)
	must(mon.Heartbeat(ctx, &brokers.WorkerInfo{
		ID: "worker_1", Tag: "mailer", Host: "host-a", PID: 101, Queues: []string{"emails"}, Concurrency: 4,
		Running: []string{"task_running"}, Names: []string{"send"}, StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}, time.Hour, brokers.StatCount{Queue: "emails", At: time.Now(), Processed: 12, Failed: 2}))
	return d
}

// command runs the command line args against d and returns what it
// printed (stdout, then stderr) and its exit code.
func (d *deployment) command(args ...string) (string, int) {
	var out, errs syncbuf.Buffer
	code := run(context.Background(), append([]string{"--config", d.configPath}, args...), env{
		getenv: func(string) string { return "" },
		stdout: &out, stderr: &errs,
	})
	return out.String() + errs.String(), code
}

// Times and durations that change from run to run.
var (
	stampNow = regexp.MustCompile(`20[0-8]\d-\d\d-\d\d \d\d:\d\d:\d\d UTC`)
	rfcNow   = regexp.MustCompile(`"20[0-8]\d-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)"`)
	duration = regexp.MustCompile(`in (\d+h)?(\d+m)?\d+(\.\d+)?(ms|µs|s)|(\d+h)?(\d+m)?\d+(\.\d+)?(ms|µs|s) ago`)
	chainID  = regexp.MustCompile(`chain_[0-9a-f-]{8,36}`)
	graphID  = regexp.MustCompile(`workflow_[0-9a-f-]{8,36}`)
	clock    = regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d\d\d\b`)
	eventID  = regexp.MustCompile(`"\d{10,}-\d+"`)
	dayRow   = regexp.MustCompile(`(?m)^20[0-8]\d-\d\d-\d\d `) // a row of queue history
)

func mask(s string) string {
	s = stampNow.ReplaceAllString(s, "####-##-## ##:##:## UTC") // as wide: columns stay aligned
	s = rfcNow.ReplaceAllString(s, `"<time>"`)
	s = duration.ReplaceAllString(s, "<duration>")
	s = graphID.ReplaceAllString(s, "workflow_<id>")
	s = clock.ReplaceAllString(s, "##:##:##.###")
	s = eventID.ReplaceAllString(s, `"<event id>"`)
	s = dayRow.ReplaceAllString(s, "####-##-## ")
	return chainID.ReplaceAllString(s, "chain_<id>")
}

// session runs each command line against d and compares the transcript
// with the golden file testdata/<name>.golden.
func (d *deployment) session(t *testing.T, name string, lines ...string) {
	t.Helper()
	var transcript strings.Builder
	for _, line := range lines {
		out, code := d.command(strings.Fields(line)...)
		fmt.Fprintf(&transcript, "$ machinist %s\n%s", line, out)
		if code != exitOK {
			fmt.Fprintf(&transcript, "[exit %d]\n", code)
		}
		transcript.WriteString("\n")
	}
	got := strings.ReplaceAll(mask(transcript.String()), d.prefix, "<prefix>")
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/machinist -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("transcript differs from %s (go test ./cmd/machinist -update rewrites it; review with git diff):\n%s", path, diffLines(string(want), got))
	}
}

// diffLines shows the lines of got that differ from want.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, wl, gl)
		}
	}
	return b.String()
}

// What the command shows of a deployment: every read-only command, for
// people and for scripts.
func TestShow(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.session(t, "show",
		"stats",
		"queue ls",
		"queue inspect emails",
		"queue inspect digests",
		"queue inspect nowhere",
		"task ls emails",
		"task ls emails --state scheduled",
		"task ls emails --state active",
		"task ls emails --size 2 --page 2",
		"task ls reports --state archived",
		"task ls flows --state archived",
		"task ls emails --state bogus",
		"task show task_p1",
		"task show task_running",
		"task show task_a1 --queue reports",
		"task show task_m2",
		"task show task_sum",
		"task show task_nowhere",
		"workflow show group_chord",
		"workflow show task_c2",
		"workflow show nothing_here",
		"workflow show task_g1",
		"task watch task_m1",
		"task watch task_m1 --json",
		"task watch task_nowhere",
		"workflow show task_g4 --size 2 --page 2",
		"workflow show task_g4 --size 2 --page 3",
		"workflow show task_g4 --size 0",
		"workers",
		"stats --json",
		"task show task_p1 --json",
		"workflow show task_m1 --json",
		"workflow show task_g1 --json",
		"workers --json",
	)
}

// What the command does: each action, with its effect shown after it,
// and the refusals.
func TestActions(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.session(t, "actions",
		"task run task_s1",
		"task delete task_p3",
		"task archive task_p2",
		"task ls emails --state archived",
		"task requeue task_p2",
		"task requeue task_p1",
		"task cancel task_a1",
		"task delete task_a1",
		"task ls reports --state archived",
		"task cancel task_running",
		"task show task_running",
		"task cancel task_m1",
		"task run task_m1",
		"task delete task_m1",
		"task archive task_m1",
		"task requeue task_m1",
		"task delete task_nowhere",
		"task ls emails",
		"queue resume reports",
		"queue pause emails",
		"queue ls",
		"queue pause nowhere",
		"workflow cancel task_c1",
		"workflow show task_c1",
		"workflow cancel group_chord",
		"task run task_p1 --json",
	)
}

// Actions on all of a queue's tasks in one state: refused unless
// confirmed, refused for a state they do not take, then done a page at a
// time, with the count.
func TestBulkActions(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.session(t, "bulk",
		"queue inspect emails",
		"queue history emails",
		"queue history nowhere",
		"task archive-all emails --state pending",
		"task run-all emails --state pending --yes",
		"task archive-all emails --state pending --yes",
		"task ls emails --state archived",
		"task requeue-all emails --yes --json",
		"task delete-all emails --state pending --yes",
		"queue inspect emails",
		"queue rm later",
		"queue rm later --force --yes",
		"queue rm emails --force --yes",
		"queue ls",
	)
}

// Configuration: the environment over the file, flags over both; a
// broker the command cannot reach from outside is refused with a usage
// error.
func TestConfig(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	rs := redistest.Shared(t)
	runWith := func(getenv func(string) string, args ...string) (string, int) {
		var out syncbuf.Buffer
		code := run(context.Background(), args, env{getenv: getenv, stdout: &out, stderr: &out})
		return out.String(), code
	}
	noEnv := func(string) string { return "" }
	prefix := strings.TrimSuffix(d.prefix, ":")
	cases := []struct {
		name   string
		getenv func(string) string
		args   []string
		code   int
		want   string
	}{
		{"flags", noEnv, []string{"--broker", rs.URL(), "--key-prefix", prefix, "queue", "ls"}, exitOK, "emails"},
		{"environment", func(k string) string {
			return map[string]string{"BROKER": rs.URL(), "REDIS_KEY_PREFIX": prefix}[k]
		}, []string{"queue", "ls"}, exitOK, "emails"},
		{"MACHINIST_CONFIG", func(k string) string {
			return map[string]string{"MACHINIST_CONFIG": d.configPath}[k]
		}, []string{"queue", "ls"}, exitOK, "emails"},
		{"environment over the file", func(k string) string {
			return map[string]string{"REDIS_KEY_PREFIX": "elsewhere"}[k]
		}, []string{"--config", d.configPath, "queue", "ls"}, exitOK, "no queues"},
		{"flag over the environment", func(k string) string {
			return map[string]string{"REDIS_KEY_PREFIX": "elsewhere"}[k]
		}, []string{"--config", d.configPath, "--key-prefix", prefix, "queue", "ls"}, exitOK, "emails"},
		{"no broker", noEnv, []string{"stats"}, exitUsage, "no broker is set: point --broker, BROKER or --config at the Redis"},
		{"the in-process broker", noEnv, []string{"--broker", "memory://", "stats"}, exitUsage, `the broker is "memory://"`},
		{"a password is not shown", noEnv, []string{"--broker", "memory://user:secret@host", "stats"}, exitUsage, `"memory://***@host"`},
		{"a password is not shown without a scheme", noEnv, []string{"--broker", "secret@10.0.0.5:6379", "stats"}, exitUsage, `"***@10.0.0.5:6379"`},
		{"unreachable", noEnv, []string{"--broker", "redis://:secret@127.0.0.1:1", "--timeout", "20s", "stats"}, exitFailed,
			"(broker redis://***@127.0.0.1:1)"},
		{"Redis's own error is not a usage error", noEnv, []string{"--broker", "redis://127.0.0.1:1", "task", "show", "accepts 1 arg"}, exitFailed, "127.0.0.1:1"},
		{"missing file", noEnv, []string{"--config", "/nonexistent.yml", "stats"}, exitFailed, "/nonexistent.yml"},
		{"unknown flag", noEnv, []string{"--bogus"}, exitUsage, "unknown flag"},
		{"no subcommand", noEnv, []string{"task"}, exitUsage, "task needs a subcommand"},
		{"missing argument", noEnv, []string{"--config", d.configPath, "task", "show"}, exitUsage,
			"accepts 1 arg(s), received 0\nUsage: machinist task show TASK_UUID [flags]\n"},
		{"no queue to list", noEnv, []string{"task", "ls"}, exitUsage,
			"accepts 1 arg(s), received 0\nUsage: machinist task ls QUEUE [flags]\n"},
		{"too many arguments", noEnv, []string{"task", "cancel", "a", "b"}, exitUsage,
			"accepts 1 arg(s), received 2\nUsage: machinist task cancel TASK_UUID [flags]\n"},
	}
	for _, c := range cases {
		out, code := runWith(c.getenv, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, output:\n%s\nwant exit %d and %q", c.name, code, out, c.code, c.want)
		}
		if strings.Contains(out, "secret") {
			t.Errorf("%s: the output shows a password:\n%s", c.name, out)
		}
	}
	// The queue list shows only queues when the prefix matches: the file
	// was read.
	if out, _ := runWith(noEnv, "--config", d.configPath, "queue", "ls"); !strings.Contains(out, "reports") || strings.Contains(out, "no queues") {
		t.Errorf("queue ls with the file:\n%s", out)
	}
}

// Colour only on request or on a terminal, and never with NO_COLOR.
func TestColour(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	for _, c := range []struct {
		args []string
		tty  bool
		env  map[string]string
		want bool
	}{
		{nil, false, nil, false},
		{nil, true, nil, true},
		{nil, true, map[string]string{"NO_COLOR": "1"}, false},
		{[]string{"--color", "always"}, false, nil, true},
		{[]string{"--color", "never"}, true, nil, false},
	} {
		var out syncbuf.Buffer
		args := append([]string{"--config", d.configPath}, c.args...)
		run(context.Background(), append(args, "task", "show", "task_m2"), env{getenv: func(k string) string { return c.env[k] }, stdout: &out, stderr: &out, tty: c.tty})
		if got := strings.Contains(out.String(), "\x1b["); got != c.want {
			t.Errorf("flags %v, terminal %v, env %v: coloured %v, want %v:\n%s", c.args, c.tty, c.env, got, c.want, out.String())
		}
	}
}

// dash serves the dashboard until its context ends, on the address and
// under the prefix given, behind basic auth when asked.
func TestDash(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out syncbuf.Buffer
	done := make(chan int, 1)
	getenv := func(k string) string { return map[string]string{"MACHINIST_DASH_PASSWORD": "s3cret"}[k] }
	go func() {
		done <- run(ctx, []string{"--config", d.configPath, "dash", "--addr", "127.0.0.1:0", "--user", "ops", "--read-only", "--prefix", "machinist"},
			env{getenv: getenv, stdout: &out, stderr: &out})
	}()
	addr := regexp.MustCompile(`http://127\.0\.0\.1:\d+/machinist/`)
	deadline := time.Now().Add(20 * time.Second)
	for addr.FindString(out.String()) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("dash did not say where it listens:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	url := addr.FindString(out.String())
	if !strings.Contains(out.String(), "(read-only)") {
		t.Errorf("dash did not say it is read-only:\n%s", out.String())
	}
	get := func(user, pass string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("", ""); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", code)
	}
	if code, _ := get("ops", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("with a wrong password: %d, want 401", code)
	}
	code, body := get("ops", "s3cret")
	if code != http.StatusOK || !strings.Contains(body, "emails") || !strings.Contains(body, "reports") {
		t.Errorf("the queues page: %d\n%s", code, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("dash exited %d:\n%s", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("dash did not stop when its context ended")
	}
	if _, code := (&deployment{configPath: d.configPath}).command("dash", "--user", "ops"); code != exitUsage {
		t.Errorf("dash --user without a password: exit %d, want %d", code, exitUsage)
	}
}
