package chaos_test

// A stale worker under SIGSTOP: the worker process running a long task
// is paused past its lease after its first checkpoint; another worker
// takes the task, resumes from that checkpoint and checkpoints again.
// When the paused process resumes, its checkpoint and its step are
// refused: what the task keeps is the second worker's.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

const (
	staleTask  = "chaos.stale"
	staleQueue = "chaos_stale"
	// staleEnv, when set to "<witness url>|<witness key>", turns the test
	// binary into a worker process of staleQueue (runStaleWorker).
	staleEnv = "MACHINIST_CHAOS_STALE"
)

func init() {
	if spec := os.Getenv(staleEnv); spec != "" {
		runStaleWorker(spec) // never returns
	}
}

func TestPausedWorkerKeepsNothingOfItsTask(t *testing.T) {
	t.Parallel()
	repeat(t, func(int) { pausedWorkerKeepsNothing(t) })
}

func pausedWorkerKeepsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	srv := redistest.Start(t)
	url := srv.URL()
	w := newAggWitness(t)
	a := spawn(t, "A", append([]string{staleEnv + "=" + "redis://" + w.client.Options().Addr + "|" + w.key}, aggregatorConfig(url)...)...)
	s, err := machinery.NewServer(&config.Config{
		Broker: url, ResultBackend: url, NoUnixSignals: true, LeaseDuration: shortLease,
		Redis:  &config.RedisConfig{NormalTasksPollPeriod: 50},
		Logger: slog.New(slog.NewTextHandler(logFile(t, "B.log"), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := registerStale(s, w.client, w.key, "B"); err != nil {
		t.Fatal(err)
	}
	sig := &tasks.Signature{Name: staleTask, RoutingKey: staleQueue}
	res, err := s.SendTaskWithContext(ctx, sig)
	if err != nil {
		t.Fatalf("SendTask: %v", err)
	}
	witnessed := func(kind, who string) (string, bool) {
		entries, err := w.client.LRange(ctx, w.key, 0, -1).Result()
		if err != nil {
			t.Fatalf("read the witness: %v", err)
		}
		for _, e := range entries {
			if f := strings.Split(e, "|"); f[0] == kind && f[1] == who {
				return f[3], true
			}
		}
		return "", false
	}
	waitFor(t, 30*time.Second, "worker A to checkpoint", func() bool { _, ok := witnessed("ready", "A"); return ok })
	a.Pause(t)
	launchWorker(t, s.NewQueuesWorker("B", 1, map[string]int{staleQueue: 1}, false))
	waitFor(t, 30*time.Second, "worker B to take the task over", func() bool { _, ok := witnessed("ready", "B"); return ok })
	a.Resume(t)
	waitFor(t, 30*time.Second, "worker A to try its stale writes", func() bool { _, ok := witnessed("stale", "A"); return ok })
	if from, _ := witnessed("start", "B"); from != "1" {
		t.Errorf("worker B started from checkpoint %q, want A's 1", from)
	}
	if errs, _ := witnessed("stale", "A"); !strings.Contains(errs, "checkpoint: lease lost") || !strings.Contains(errs, "step: lease lost") {
		t.Errorf("worker A's stale writes: %s, want its checkpoint and step refused for a lost lease", errs)
	}
	// What the task keeps is B's, whatever A tried to write after
	// resuming. B's progress is written soon after it reports it: wait
	// for it.
	key := "machinist:{" + staleQueue + "}:t:" + sig.UUID
	var kept []interface{}
	waitFor(t, 30*time.Second, "worker B's progress", func() bool {
		if kept, err = srv.Client(t).HMGet(ctx, key, "x:checkpoint", "x:step:late", "x:progress").Result(); err != nil {
			t.Fatal(err)
		}
		var p tasks.Progress
		progress, _ := kept[2].(string)
		return json.Unmarshal([]byte(progress), &p) == nil && p.Done == 2
	})
	if kept[0] != "2" || kept[1] != nil {
		t.Errorf("the task keeps checkpoint %v, step %v; want B's 2, and no step", kept[0], kept[1])
	}
	if _, err := w.client.RPush(ctx, w.key, "finish|test||||").Result(); err != nil {
		t.Fatal(err)
	}
	if out, err := res.GetWithContext(ctx, 5*time.Millisecond); err != nil || len(out) != 1 || out[0].Interface() != "B" {
		t.Fatalf("result %v, %v; want [B]", out, err)
	}
}

// registerStale registers staleTask on s as who: it checkpoints after
// the checkpoint it starts from and reports "ready"; A then waits for B
// to be ready (the test pauses A meanwhile, and B takes the task over)
// and records what its writes after that came to; B waits for the test
// to let it finish.
func registerStale(s *machinery.Server, witness goredis.UniversalClient, key, who string) error {
	return s.RegisterTask(staleTask, func(ctx context.Context) (string, error) {
		var at int64
		if _, err := tasks.LoadCheckpoint(ctx, &at); err != nil {
			return "", err
		}
		if err := record(ctx, witness, key, "start", who, "", strconv.FormatInt(at, 10)); err != nil {
			return "", err
		}
		if err := tasks.Checkpoint(ctx, at+1); err != nil {
			return "", err
		}
		if err := tasks.SetProgress(ctx, tasks.Progress{Done: at + 1}); err != nil {
			return "", err
		}
		if err := record(ctx, witness, key, "ready", who, "", ""); err != nil {
			return "", err
		}
		if who == "A" {
			// Paused meanwhile, past the lease: B takes the task over.
			if err := waitWitness(context.WithoutCancel(ctx), witness, key, "ready|B|"); err != nil {
				return "", err
			}
			// As a task that does not watch its context would: the
			// lease, not the context, must stop these writes.
			stale := context.WithoutCancel(ctx)
			errCheckpoint := tasks.Checkpoint(stale, int64(100))
			_, errStep := tasks.Step(stale, "late", func() (int, error) { return 1, nil })
			msg := fmt.Sprintf("checkpoint: %v; step: %v", leaseLost(errCheckpoint), leaseLost(errStep))
			return "", record(context.WithoutCancel(ctx), witness, key, "stale", who, "", msg)
		}
		if err := waitWitness(ctx, witness, key, "finish|"); err != nil {
			return "", err
		}
		return who, nil
	})
}

// waitWitness waits until the witness list key has an entry that starts
// with prefix, or ctx ends.
func waitWitness(ctx context.Context, witness goredis.UniversalClient, key, prefix string) error {
	for {
		entries, err := witness.LRange(ctx, key, 0, -1).Result()
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasPrefix(e, prefix) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// leaseLost names what a stale write came to: "lease lost" for the
// refusal of a lost lease, "written" for none.
func leaseLost(err error) string {
	switch {
	case err == nil:
		return "written"
	case strings.Contains(err.Error(), "lease lost"):
		return "lease lost"
	}
	return err.Error()
}

// runStaleWorker runs a worker process of staleQueue for spec (see
// staleEnv) until SIGTERM or SIGINT.
func runStaleWorker(spec string) {
	runWitnessedWorker("stale", staleQueue, spec, func(s *machinery.Server, witness goredis.UniversalClient, key string) error {
		return registerStale(s, witness, key, "A")
	})
}
