package transport

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Replicated writes.
//
// Redis replicates asynchronously: a write the master acknowledged may not
// have reached its replica when the replica is promoted (a Sentinel
// failover), and is then lost. With rdb.Options.MinReplicas set, every
// write machinist counts on (a send's PENDING states and enqueue, a fetch, a
// settle, a state, a chord's election, a group's creation, a claim) is
// followed by WAIT on the same connection, in the same round trip; a write
// that fewer replicas confirm within the timeout is an error wrapping
// ErrNotReplicated, which leaves open whether it happened, and is sent
// again like a lost reply (retry.go). A settle sent again finds its first
// run's effect on the promoted replica or, if the first run was lost with
// the old master, runs there. WAIT has no key, so on Redis Cluster each
// node's client adds it to its own pipelines (WaitHook, set up by
// rdb.NewClient) and single writes go as pipelines.

// Replicas is how writes wait for replicas: N of them, for at most
// Timeout; N == 0 does not wait. With ByNodes (Redis Cluster) the nodes'
// clients add WAIT to their pipelines themselves (WaitHook), and writes
// only have to go as pipelines.
type Replicas struct {
	N       int
	Timeout time.Duration
	ByNodes bool
}

// wait queues WAIT on p, or nothing when writes do not wait (or the nodes
// add it).
func (r Replicas) wait(ctx context.Context, p goredis.Pipeliner) *goredis.IntCmd {
	if r.N == 0 || r.ByNodes {
		return nil
	}
	cmd := goredis.NewIntCmd(ctx, "wait", r.N, r.Timeout.Milliseconds())
	_ = p.Process(ctx, cmd)
	return cmd
}

// check returns the error of a WAIT queued by wait: nil when enough
// replicas confirmed the writes before it.
func (r Replicas) check(w *goredis.IntCmd) error {
	if w == nil {
		return nil
	}
	got, err := w.Result()
	if err != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	if got < int64(r.N) {
		return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, got, r.N, r.Timeout)
	}
	return nil
}

// mark sets err on every command of cmds that succeeded.
func mark(cmds []goredis.Cmder, err error) {
	for _, c := range cmds {
		if c.Err() == nil {
			c.SetErr(err)
		}
	}
}

// WaitHook ends each pipeline of a cluster node's client with WAIT on the
// same connection, and gives the pipeline's commands its error when too
// few replicas confirmed them.
type WaitHook struct{ Replicas Replicas }

func (WaitHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (WaitHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (h WaitHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		w := goredis.NewIntCmd(ctx, "wait", h.Replicas.N, h.Replicas.Timeout.Milliseconds())
		err := next(ctx, append(cmds[:len(cmds):len(cmds)], w))
		if werr := h.Replicas.check(w); werr != nil {
			mark(cmds, werr)
		}
		return err
	}
}

// process sends cmd on c, followed by WAIT when writes wait for replicas.
func (r Replicas) process(ctx context.Context, c goredis.UniversalClient, cmd goredis.Cmder) {
	if r.N == 0 {
		_ = c.Process(ctx, cmd)
		return
	}
	var w *goredis.IntCmd
	_, _ = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		_ = p.Process(ctx, cmd)
		w = r.wait(ctx, p)
		return nil
	})
	if cmd.Err() == nil {
		if err := r.check(w); err != nil {
			cmd.SetErr(err)
		}
	}
}

// Eval runs script on c with EVALSHA (and EVAL after NOSCRIPT), followed
// by WAIT when writes wait for replicas. With once, go-redis does not send
// it a second time (see retry.go).
func (r Replicas) Eval(ctx context.Context, c goredis.UniversalClient, once bool, script *goredis.Script, keys []string, args []interface{}) *goredis.Cmd {
	send := func() *goredis.Cmd {
		cmd := EvalShaOnce(ctx, script, keys, args)
		if once {
			r.process(ctx, c, cmd)
		} else {
			r.process(ctx, c, cmd.Cmd)
		}
		return cmd.Cmd
	}
	cmd := send()
	if IsNoScript(cmd.Err()) {
		if err := script.Load(ctx, c).Err(); err != nil {
			return errCmd(ctx, err)
		}
		cmd = send()
	}
	return cmd
}
