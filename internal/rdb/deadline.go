package rdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/store"
)

// Deadlines.
//
// A call returns when its context ends, whatever Redis does. go-redis
// alone does not promise that: it bounds a read by the client's read
// timeout, and by the context's deadline only when the client has
// ContextTimeoutEnabled (NewClient sets it; a client passed in may not);
// it sends again after a timeout; and the batcher sends one pipeline for
// many callers, on a context none of them owns. So no caller whose
// context can end does I/O on its own goroutine that it could not leave:
//
//   - the batcher sends on a goroutine of its own for such a caller
//     (Batcher.Submit, Batcher.Run), and the caller waits for its replies
//     or its context, whichever comes first (Pending.Wait, Store.enqueue);
//   - a call the store makes on the client itself, on the way of a send or
//     a state read (a queue's shards, loading scripts, a group's record,
//     EVAL after NOSCRIPT), goes through detach;
//   - again stops at the context's end.
//
// What a caller leaves goes on, detached, to a deadline of its own (a
// pipeline's execTimeout; a direct call's context, with a client that
// honours it, else its read timeout), so that the others sharing it get
// their replies and a lane's later pipelines still follow it in order.
//
// The error of a call its context ended wraps the context's error and says
// whether its commands went out: errUnsent when they had not (they were
// waiting their turn, and are dropped), errUnanswered when they had and
// the reply had not come. outcomeUnknown reads the second. A publish's
// error says either to its caller (sendOutcome: store.ErrNotSent,
// store.ErrMaybeSent).

var (
	// errUnsent marks the error of a call whose commands were not sent:
	// its context ended, or the batcher closed, before they went out; or
	// Redis refused them.
	errUnsent = errors.New("rdb: not sent")
	// errUnanswered marks the error of a call whose commands went out and
	// whose reply did not come (its context ended first), or of one sent
	// again after such an attempt: Redis may have run them.
	errUnanswered = errors.New("rdb: sent, reply not received")
)

// marked is an error that reads as err and also matches mark (errors.Is).
type marked struct{ err, mark error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.mark} }

// unsent marks err as the error of a call that sent nothing.
func unsent(err error) error { return &marked{err: err, mark: errUnsent} }

// unanswered marks err as the error of a call whose commands may have run.
func unanswered(err error) error { return &marked{err: err, mark: errUnanswered} }

// expired returns ctx's error, or context.DeadlineExceeded once ctx's
// deadline has passed though ctx does not say so yet: it learns it from a
// timer of its own, which may run after a read that the same deadline cut
// has returned.
func expired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// ended returns err, wrapping ctx's error as well when ctx has ended and
// err does not already say so (go-redis reports a read its deadline cut
// as an i/o timeout).
func ended(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	cerr := expired(ctx)
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", cerr, err)
}

// detach calls fn, which makes calls on the client with ctx, and returns
// its error. When ctx can end, fn runs on a goroutine of its own and detach
// returns as soon as ctx ends, with ctx's error marked as leaving unknown
// whether fn's commands ran; fn goes on until its calls end. The caller
// reads what fn sets only after detach returned nil.
func detach(ctx context.Context, fn func() error) error {
	if ctx.Done() == nil {
		return fn()
	}
	if err := expired(ctx); err != nil {
		return unsent(err)
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil && expired(ctx) != nil {
			// Cut by ctx's deadline, or given up at it: it went out.
			return unanswered(ended(ctx, err))
		}
		return err
	case <-ctx.Done():
		return unanswered(ctx.Err())
	}
}

// evalDetached is repl.eval through detach.
func (b *Batcher) evalDetached(ctx context.Context, once bool, script *goredis.Script, keys []string, args []interface{}) *goredis.Cmd {
	var cmd *goredis.Cmd
	if err := detach(ctx, func() error {
		cmd = b.repl.eval(ctx, b.client, once, script, keys, args)
		return cmd.Err()
	}); err != nil {
		return errCmd(ctx, err)
	}
	return cmd
}

// sendOutcome returns err, the error of a publish, wrapping ctx's error
// when ctx has ended, and store.ErrMaybeSent when some of its tasks may
// be queued (partly: a part of the publish went through before it failed;
// or err, an enqueue's error when tried, says it may have run: a request
// went out and its reply never came, or could not be read), else
// store.ErrNotSent: nothing went out, or Redis refused it.
func sendOutcome(ctx context.Context, err error, tried, partly bool) error {
	if err == nil {
		return nil
	}
	err = ended(ctx, err)
	if partly || tried && mayHaveRun(err) {
		return store.MaybeSent(err)
	}
	return store.NotSent(err)
}

// mayHaveRun reports whether err, the error of a call, leaves open that
// Redis ran it: unless its outcome is known to be unknown, only a call
// that was not sent (errUnsent, the batcher closed) or that Redis refused
// (an error reply, but not one found inside a malformed reply) surely did
// not run.
func mayHaveRun(err error) bool {
	if outcomeUnknown(err) || errors.Is(err, ErrMalformedReply) {
		return true
	}
	var reply goredis.Error
	return !errors.Is(err, errUnsent) && !errors.Is(err, errBatcherClosed) && !errors.As(err, &reply)
}
