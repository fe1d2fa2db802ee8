package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Deadlines.
//
// A call returns when its context ends, whatever Redis does. go-redis
// alone does not promise that: it bounds a read by the client's read
// timeout, and by the context's deadline only when the client has
// ContextTimeoutEnabled (rdb.NewClient sets it; a client passed in may
// not); it sends again after a timeout; and the batcher sends one pipeline
// for many callers, on a context none of them owns. So no caller whose
// context can end does I/O on its own goroutine that it could not leave:
//
//   - the batcher sends on a goroutine of its own for such a caller
//     (Batcher.Submit, Batcher.Run), and the caller waits for its replies
//     or its context, whichever comes first (Pending.Wait, and rdb's
//     combined publishes);
//   - a call the store makes on the client itself, on the way of a send or
//     a state read (a queue's shards, loading scripts, a group's record,
//     EVAL after NOSCRIPT), goes through Detach;
//   - Again stops at the context's end.
//
// What a caller leaves goes on, detached, to a deadline of its own (a
// pipeline's execTimeout; a direct call's context, with a client that
// honours it, else its read timeout), so that the others sharing it get
// their replies and a lane's later pipelines still follow it in order.
//
// The error of a call its context ended wraps the context's error and says
// whether its commands went out: ErrUnsent when they had not (they were
// waiting their turn, and are dropped), ErrUnanswered when they had and
// the reply had not come. OutcomeUnknown reads the second. A publish's
// error says either to its caller (rdb's sendOutcome: store.ErrNotSent,
// store.ErrMaybeSent).

// marked is an error that reads as err and also matches mark (errors.Is).
type marked struct{ err, mark error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.mark} }

// Unsent marks err as the error of a call that sent nothing.
func Unsent(err error) error { return &marked{err: err, mark: ErrUnsent} }

// Unanswered marks err as the error of a call whose commands may have run.
func Unanswered(err error) error { return &marked{err: err, mark: ErrUnanswered} }

// Expired returns ctx's error, or context.DeadlineExceeded once ctx's
// deadline has passed though ctx does not say so yet: it learns it from a
// timer of its own, which may run after a read that the same deadline cut
// has returned.
func Expired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// Ended returns err, wrapping ctx's error as well when ctx has ended and
// err does not already say so (go-redis reports a read its deadline cut
// as an i/o timeout).
func Ended(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	cerr := Expired(ctx)
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", cerr, err)
}

// Detach calls fn, which makes calls on the client with ctx, and returns
// its error. When ctx can end, fn runs on a goroutine of its own and Detach
// returns as soon as ctx ends, with ctx's error marked as leaving unknown
// whether fn's commands ran; fn goes on until its calls end. The caller
// reads what fn sets only after Detach returned nil.
func Detach(ctx context.Context, fn func() error) error {
	if ctx.Done() == nil {
		return fn()
	}
	if err := Expired(ctx); err != nil {
		return Unsent(err)
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil && Expired(ctx) != nil {
			// Cut by ctx's deadline, or given up at it: it went out.
			return Unanswered(Ended(ctx, err))
		}
		return err
	case <-ctx.Done():
		return Unanswered(ctx.Err())
	}
}

// EvalDetached is Replicas.Eval, on the batcher's client and with its
// replicas, through Detach.
func (b *Batcher) EvalDetached(ctx context.Context, once bool, script *goredis.Script, keys []string, args []interface{}) *goredis.Cmd {
	var cmd *goredis.Cmd
	if err := Detach(ctx, func() error {
		cmd = b.repl.Eval(ctx, b.client, once, script, keys, args)
		return cmd.Err()
	}); err != nil {
		return errCmd(ctx, err)
	}
	return cmd
}
