package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Scripts and retries.
//
// go-redis sends a command again after an error that leaves unknown
// whether Redis ran it (a read timeout, a reset connection), and a Redis
// that hung past the read timeout runs both copies when it resumes. So
// every script of package rdb is one of four kinds:
//
//   - Safe to run twice: the state and group writes, purge_state,
//     extend, forward, recover, elect, resign, claim_lease and
//     complete_claim (which know their own token), announce, unroute,
//     move_due.
//     go-redis may send them again, and RunScript does after such an
//     error.
//   - Enqueue, which go-redis never sends twice: on a single server
//     machinist sends it again marked as a repeat, which finds the first
//     run's tasks by their publish token, or their states once they ran
//     and were forgotten. On Cluster the states live on other nodes, so
//     it is sent again only after Redis refused it, and a lost reply is
//     reported as an error that says it may have run.
//   - A settle (ack, ack_success, retry, archive, requeue, reroute), which a second
//     run would refuse, finding the lease gone: go-redis never sends it
//     twice (OnceCmd); settle sends it again with its "again" argument set,
//     for as long as the worker holds the lease, and the script recognises
//     the first run's settle (lib/fence.lua's check_settle), so an
//     acknowledgement that landed is reported as one. ack_success's run
//     for a chord member that completed its group leaves the lease held:
//     a run again finds the outcome it committed and does nothing more.
//     A run again takes no next task; what the first run took is put back
//     (release_fetch.lua).
//   - Neither (dequeue, requeue_archived, delete_archived): sent once, and
//     the error reported. Tasks a lost dequeue took come back when their
//     leases end.

// OnceCmd is a script call go-redis does not send a second time.
type OnceCmd struct{ *goredis.Cmd }

func (OnceCmd) NoRetry() bool { return true }

// EvalShaOnce returns the EVALSHA of script as a OnceCmd.
func EvalShaOnce(ctx context.Context, script *goredis.Script, keys []string, args []interface{}) OnceCmd {
	cmdArgs := make([]interface{}, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "evalsha", script.Hash(), len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	return OnceCmd{goredis.NewCmd(ctx, cmdArgs...)}
}

func errCmd(ctx context.Context, err error) *goredis.Cmd {
	cmd := goredis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// attempts is how many times a call is sent, at most, after errors that
// leave unknown whether it ran, unless its Retry says for how long.
const attempts = 5

// Waits between attempts: 50 ms, doubling to 1 s, each with up to half
// again of jitter.
const (
	firstWait = 50 * time.Millisecond
	maxWait   = time.Second
)

// Retry says how a call is sent again.
type Retry struct {
	// While, when set, replaces the limit of attempts: the call is sent
	// again for as long as While returns true (and ctx lasts). A settle
	// keeps going while its lease is held, so that a flaky connection
	// delays it rather than leaving the task to its lease's expiry.
	While func() bool
	// Before, when set, is called before each attempt after the first,
	// told whether an earlier attempt may have run (its outcome is
	// unknown): a settle sets its "again" argument there, a publish its
	// repeat flag when one may have.
	Before func(mayHaveRun bool)
	// RefusedOnly sends the call again only after Redis refused it (it did
	// not run), not after an error that leaves open whether it ran: for a
	// call that must not run twice and cannot recognise its first run.
	RefusedOnly bool
}

// Again calls try until it succeeds, fails with an error that is not
// uncertain, or r says to stop, waiting between attempts, and returns its
// last error; it stops when ctx ends, and its error then wraps ctx's. If
// an earlier attempt's outcome was unknown (the connection failed or timed
// out) and the last error does not say so itself (Redis refused the last
// attempt: READONLY, LOADING…; or ctx ended before it was sent), the error
// returned wraps both: the call may have happened.
func Again(ctx context.Context, try func() error, r Retry) error {
	var unknown error // the first error that leaves unknown whether the call ran
	wait := firstWait
	for attempt := 1; ; attempt++ {
		err := try()
		if unknown == nil && OutcomeUnknown(err) {
			unknown = err
		}
		stop := !Uncertain(err) || r.RefusedOnly && OutcomeUnknown(err) || Expired(ctx) != nil
		if r.While != nil {
			stop = stop || !r.While()
		} else {
			stop = stop || attempt == attempts
		}
		if stop {
			return Ended(ctx, WithUnknown(err, unknown))
		}
		t := time.NewTimer(wait + rand.N(wait/2))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Ended(ctx, WithUnknown(err, unknown))
		}
		wait = min(2*wait, maxWait)
		if r.Before != nil {
			r.Before(unknown != nil)
		}
	}
}

// WithUnknown returns err, the last attempt's error, wrapping unknown, an
// earlier attempt's whose outcome is unknown, when err does not say so
// itself.
func WithUnknown(err, unknown error) error {
	if err == nil || unknown == nil || OutcomeUnknown(err) {
		return err
	}
	return Unanswered(fmt.Errorf("%w (an earlier attempt may have run: %w)", err, unknown))
}

// OutcomeUnknown reports whether err leaves unknown whether Redis ran the
// command: the connection failed or timed out after it may have been sent,
// or the caller stopped waiting for a reply (ErrUnanswered). A call its
// caller's context ended before it was sent (ErrUnsent) did not run. A
// bare context.DeadlineExceeded (a net.Error) counts as unknown: go-redis
// returns one when the deadline passes while it waits to send an attempt
// again.
func OutcomeUnknown(err error) bool {
	if errors.Is(err, ErrUnanswered) {
		return true
	}
	if errors.Is(err, ErrUnsent) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, ErrNotReplicated)
}

// Uncertain reports whether err leaves unknown whether Redis ran the
// command (the connection failed or timed out, or replicas did not confirm
// a write), or says Redis refused it for now (loading, read-only during a
// failover, too few replicas, busy, cluster down, or
// redirected when go-redis ran out of redirections during a failover):
// either way, sending it again may succeed.
func Uncertain(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, goredis.ErrClosed) {
		return false
	}
	if OutcomeUnknown(err) {
		return true
	}
	for _, prefix := range []string{"LOADING", "READONLY", "MASTERDOWN", "NOREPLICAS", "CLUSTERDOWN", "TRYAGAIN", "BUSY ", "MOVED ", "ASK "} {
		if goredis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}
