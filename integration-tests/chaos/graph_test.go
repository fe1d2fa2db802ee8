package chaos_test

// A workflow's graph under crashes: the worker process that settles the
// first node of a diamond (a, then b and c, then d joining them) is
// killed with SIGKILL right after each step of its success's settle; a
// worker in the test's process finishes the workflow. Whatever the step,
// b, c and d each run exactly once, a is not run again, and d gets b's and
// c's results in the order of its deps.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
	"github.com/b6192125/machinist/v1/worker"
)

const (
	// graphNodeTask is the nodes' task: it records its run on the witness
	// ("run", its UUID, its args) and returns its label with its args:
	// "b(a)".
	graphNodeTask = "chaos.graph.node"

	// graphEnv, when set to "<witness url>|<witness key>|<kill step>",
	// turns the test binary into a worker process of graphFirstQueue
	// alone (runGraphWorker) that kills itself with SIGKILL after the
	// first settle step that starts with <kill step>.
	graphEnv = "MACHINIST_CHAOS_GRAPH"

	// graphFirstQueue is the first node's queue: the killed process takes
	// only that node.
	graphFirstQueue = "chaos_graph_first"
)

func init() {
	if spec := os.Getenv(graphEnv); spec != "" {
		runGraphWorker(spec) // never returns
	}
}

// TestGraphKilledAtEachStep kills the process that settles a diamond's
// first node after each step of the settle: on a single server, where the
// node's success, the release of b and c and the acknowledgement are one
// script, after it; on a Cluster, where they are steps, after each.
func TestGraphKilledAtEachStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ topology, step string }{
		{"single", "settled"},
		{"cluster", "committed"},
		{"cluster", "released"},
		{"cluster", "sent"},
	} {
		t.Run(tc.topology+"/"+tc.step, func(t *testing.T) {
			t.Parallel()
			repeat(t, func(int) { graphKilledAt(t, tc.topology, tc.step) })
		})
	}
}

func graphKilledAt(t *testing.T, topology, step string) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	var url string
	if topology == "cluster" {
		url = redistest.StartCluster(t).URL()
	} else {
		url = redistest.Start(t).URL()
	}
	w := newAggWitness(t)
	spec := strings.Join([]string{"redis://" + w.client.Options().Addr, w.key, step}, "|")
	a := spawn(t, "A", append([]string{graphEnv + "=" + spec}, aggregatorConfig(url)...)...)

	s, err := machinery.NewServer(&config.Config{
		Broker:        url,
		ResultBackend: url,
		NoUnixSignals: true,
		LeaseDuration: shortLease,
		Redis:         &config.RedisConfig{NormalTasksPollPeriod: 50},
		Logger:        slog.New(slog.NewTextHandler(logFile(t, "B.log"), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := registerGraphNode(s, w.client, w.key, "B"); err != nil {
		t.Fatal(err)
	}
	node := func(label, queue string) *tasks.Signature {
		return &tasks.Signature{Name: graphNodeTask, RoutingKey: queue, Args: []tasks.Arg{{Type: "string", Value: label}}}
	}
	wf, err := tasks.NewDAG("diamond").
		Add("a", node("a", graphFirstQueue)).
		Add("b", node("b", ""), "a").
		Add("c", node("c", ""), "a").
		Add("d", node("d", ""), "c", "b").
		Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.SendWorkflowWithContext(ctx, wf)
	if err != nil {
		t.Fatalf("SendWorkflow: %v", err)
	}
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("worker process A did not kill itself at %q within 30 s", step)
	}
	if !killedBySIGKILL(a.err) {
		t.Fatalf("worker process A exited with %v, want killed by SIGKILL at %q", a.err, step)
	}

	launchWorker(t, s.NewQueuesWorker("B", 4, map[string]int{s.GetConfig().DefaultQueue: 1, graphFirstQueue: 1}, false))
	out, err := res.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		t.Fatalf("workflow killed at %q: %v", step, err)
	}
	if len(out) != 1 || out[0].Interface() != "d(c(a()),b(a()))" {
		t.Fatalf("workflow killed at %q: result %v, want [d(c(a()),b(a()))]", step, out)
	}
	runs := make(map[string]int)
	var killed []string
	entries, err := w.client.LRange(ctx, w.key, 0, -1).Result()
	if err != nil {
		t.Fatalf("read the witness: %v", err)
	}
	for _, e := range entries {
		f := strings.Split(e, "|")
		switch f[0] {
		case "run":
			runs[f[3]]++
		case "step":
			killed = append(killed, f[1]+":"+f[2])
		}
	}
	if len(killed) != 1 || !strings.HasPrefix(killed[0], "A:"+step) {
		t.Errorf("steps recorded before a kill: %v, want one of A at %q", killed, step)
	}
	for _, label := range []string{"a", "b", "c", "d"} {
		if runs[label] != 1 {
			t.Errorf("killed at %q: node %s ran %d times, want once (runs: %v)", step, label, runs[label], runs)
		}
	}
}

// registerGraphNode registers graphNodeTask on s, recording its runs on
// the witness list key as who.
func registerGraphNode(s *machinery.Server, witness goredis.UniversalClient, key, who string) error {
	return s.RegisterTask(graphNodeTask, func(ctx context.Context, label string, parents ...string) (string, error) {
		if err := record(ctx, witness, key, "run", who, tasks.SignatureFromContext(ctx).UUID, label); err != nil {
			return "", err
		}
		return label + "(" + strings.Join(parents, ",") + ")", nil
	})
}

// runGraphWorker runs a worker process of graphFirstQueue for spec (see
// graphEnv) until it kills itself at its step, or SIGTERM or SIGINT.
func runGraphWorker(spec string) {
	fail := func(msg string) {
		fmt.Fprintln(os.Stderr, "chaos graph worker: "+msg)
		os.Exit(2)
	}
	f := strings.Split(spec, "|")
	if len(f) != 3 {
		fail(graphEnv + ": want 3 fields")
	}
	witnessURL, key, killAt := f[0], f[1], f[2]
	cnf, err := config.NewFromEnvironment()
	if err != nil {
		fail("config: " + err.Error())
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cnf.Logger = log
	s, err := machinery.NewServer(cnf)
	if err != nil {
		fail("NewServer: " + err.Error())
	}
	opts, err := goredis.ParseURL(witnessURL)
	if err != nil {
		fail("witness: " + err.Error())
	}
	witness := goredis.NewClient(opts)
	if err := registerGraphNode(s, witness, key, "A"); err != nil {
		fail("register: " + err.Error())
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
		ConsumerTag:      "A",
		Concurrency:      1,
		Queues:           []string{graphFirstQueue},
		ErrorHandlerFunc: func(error) {},
		SettleStepFunc: func(step string) {
			if !strings.HasPrefix(step, killAt) {
				return
			}
			if err := record(context.Background(), witness, key, "step", "A", step, ""); err != nil {
				fail("record the step: " + err.Error())
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		},
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := engine.Run(ctx); err != nil {
		fail("worker stopped: " + err.Error())
	}
	os.Exit(0)
}
