package chaos_test

// A long-running task under crashes: the worker process running it is
// killed with SIGKILL after its fourth step and before the checkpoint
// that follows it; the worker that takes the task after the lease runs
// out resumes from the third checkpoint, and gets the fourth step's kept
// result without running it again.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

const (
	// resumeTask checkpoints after each of its steps; in the process
	// resumeEnv makes, it kills itself after step resumeKillAt (from 0),
	// before its checkpoint.
	resumeTask  = "chaos.resume"
	resumeQueue = "chaos_resume"
	// resumeEnv, when set to "<witness url>|<witness key>", turns the
	// test binary into a worker process of resumeQueue (runResumeWorker).
	resumeEnv = "MACHINIST_CHAOS_RESUME"
	// resumeSteps is how many steps the task runs; it is killed after
	// step resumeKillAt, having kept resumeKillAt checkpoints.
	resumeSteps  = 5
	resumeKillAt = 3
)

func init() {
	if spec := os.Getenv(resumeEnv); spec != "" {
		runResumeWorker(spec) // never returns
	}
}

func TestKilledTaskResumesFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	for _, topology := range []string{"single", "cluster"} {
		t.Run(topology, func(t *testing.T) {
			t.Parallel()
			repeat(t, func(int) { killedTaskResumes(t, topology) })
		})
	}
}

func killedTaskResumes(t *testing.T, topology string) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	var url string
	if topology == "cluster" {
		url = redistest.StartCluster(t).URL()
	} else {
		url = redistest.Start(t).URL()
	}
	w := newAggWitness(t)
	spec := "redis://" + w.client.Options().Addr + "|" + w.key
	a := spawn(t, "A", append([]string{resumeEnv + "=" + spec}, aggregatorConfig(url)...)...)

	s, err := machinery.NewServer(&config.Config{
		Broker: url, ResultBackend: url, NoUnixSignals: true, LeaseDuration: shortLease,
		Redis:  &config.RedisConfig{NormalTasksPollPeriod: 50},
		Logger: slog.New(slog.NewTextHandler(logFile(t, "B.log"), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := registerResume(s, w.client, w.key, "B", false); err != nil {
		t.Fatal(err)
	}
	sig := &tasks.Signature{Name: resumeTask, RoutingKey: resumeQueue, Args: []tasks.Arg{{Type: "int64", Value: resumeSteps}}}
	res, err := s.SendTaskWithContext(ctx, sig)
	if err != nil {
		t.Fatalf("SendTask: %v", err)
	}
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("worker process A did not kill itself within 30 s")
	}
	if !killedBySIGKILL(a.err) {
		t.Fatalf("worker process A exited with %v, want killed by SIGKILL", a.err)
	}

	launchWorker(t, s.NewQueuesWorker("B", 1, map[string]int{resumeQueue: 1}, false))
	out, err := res.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		t.Fatalf("the task after its worker was killed: %v", err)
	}
	if want := fmt.Sprintf("resumed at %d", resumeKillAt); len(out) != 1 || out[0].Interface() != want {
		t.Fatalf("result %v, want [%s]", out, want)
	}
	entries, err := w.client.LRange(ctx, w.key, 0, -1).Result()
	if err != nil {
		t.Fatalf("read the witness: %v", err)
	}
	steps := map[string][]string{} // step → who ran it
	var starts []string
	for _, e := range entries {
		f := strings.Split(e, "|")
		switch f[0] {
		case "step":
			steps[f[3]] = append(steps[f[3]], f[1])
		case "start":
			starts = append(starts, f[1]+"@"+f[3])
		}
	}
	if fmt.Sprint(starts) != fmt.Sprintf("[A@0 B@%d]", resumeKillAt) {
		t.Errorf("attempts started %v, want A from 0, then B from %d", starts, resumeKillAt)
	}
	for i := range resumeSteps {
		who := "A"
		if i > resumeKillAt {
			who = "B"
		}
		if got := steps[strconv.Itoa(i)]; fmt.Sprint(got) != "["+who+"]" {
			t.Errorf("step %d ran by %v, want once, by %s (steps: %v)", i, got, who, steps)
		}
	}
}

// registerResume registers resumeTask on s, recording on the witness
// where each attempt started and each step's run, as who; with kill, the
// process kills itself after step resumeKillAt, before its checkpoint.
func registerResume(s *machinery.Server, witness goredis.UniversalClient, key, who string, kill bool) error {
	return s.RegisterTask(resumeTask, func(ctx context.Context, n int64) (string, error) {
		var at int64
		if _, err := tasks.LoadCheckpoint(ctx, &at); err != nil {
			return "", err
		}
		if err := record(ctx, witness, key, "start", who, "", strconv.FormatInt(at, 10)); err != nil {
			return "", err
		}
		for i := at; i < n; i++ {
			_, err := tasks.Step(ctx, "s"+strconv.FormatInt(i, 10), func() (int64, error) {
				return i, record(ctx, witness, key, "step", who, "", strconv.FormatInt(i, 10))
			})
			if err != nil {
				return "", err
			}
			if kill && i == resumeKillAt {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
			if err := tasks.Checkpoint(ctx, i+1); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("resumed at %d", at), nil
	})
}

// runResumeWorker runs a worker process of resumeQueue for spec (see
// resumeEnv) until the task kills it, or SIGTERM or SIGINT.
func runResumeWorker(spec string) {
	runWitnessedWorker("resume", resumeQueue, spec, func(s *machinery.Server, witness goredis.UniversalClient, key string) error {
		return registerResume(s, witness, key, "A", true)
	})
}

// runWitnessedWorker runs worker process "A" of queue, configured from
// the environment, with what register registers recording on the witness
// "<url>|<list key>" of spec, until SIGTERM or SIGINT (or its task kills
// it). It never returns.
func runWitnessedWorker(name, queue, spec string, register func(s *machinery.Server, witness goredis.UniversalClient, key string) error) {
	fail := func(msg string) {
		fmt.Fprintf(os.Stderr, "chaos %s worker: %s\n", name, msg)
		os.Exit(2)
	}
	witnessURL, key, ok := strings.Cut(spec, "|")
	if !ok {
		fail("want <witness url>|<witness key>, got " + spec)
	}
	cnf, err := config.NewFromEnvironment()
	if err != nil {
		fail("config: " + err.Error())
	}
	cnf.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := machinery.NewServer(cnf)
	if err != nil {
		fail("NewServer: " + err.Error())
	}
	opts, err := goredis.ParseURL(witnessURL)
	if err != nil {
		fail("witness: " + err.Error())
	}
	if err := register(s, goredis.NewClient(opts), key); err != nil {
		fail("register: " + err.Error())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errs := make(chan error, 1)
	w := s.NewQueuesWorker("A", 1, map[string]int{queue: 1}, false)
	w.LaunchAsync(errs)
	select {
	case err := <-errs:
		fail(fmt.Sprintf("worker stopped: %v", err))
	case <-ctx.Done():
		w.Quit()
	}
	os.Exit(0)
}
