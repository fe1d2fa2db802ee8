package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
)

// redisError is a reply error as go-redis returns one.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func TestUncertain(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{timeout, true},
		{fmt.Errorf("publish: %w", timeout), true},
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{redisError("LOADING Redis is loading the dataset in memory"), true},
		{redisError("READONLY You can't write against a read only replica."), true},
		{redisError("BUSY Redis is busy running a script."), true},
		{redisError("MOVED 5946 127.0.0.1:37889"), true},
		{redisError("ASK 5946 127.0.0.1:37889"), true},
		{redisError("NOSCRIPT No matching script."), false},
		{redisError("ERR wrong number of arguments"), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{goredis.ErrClosed, false},
		{errors.New("rdb: batcher closed"), false},
	} {
		if got := Uncertain(tc.err); got != tc.want {
			t.Errorf("Uncertain(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}

func TestAgainSaysAnEarlierAttemptMayHaveRun(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	replies := []error{timeout, redisError("READONLY You can't write against a read only replica."), redisError("ERR no such key")}
	calls := 0
	err := Again(context.Background(), func() error {
		calls++
		return replies[calls-1]
	}, Retry{})
	if calls != 3 {
		t.Fatalf("%d attempts, want 3: the refusals for now are tried again, the last one is not", calls)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !errors.Is(err, replies[2]) {
		t.Fatalf("again returned %v: want the last error, wrapping the timeout of the first attempt", err)
	}
	if got := err.Error(); got != "ERR no such key (an earlier attempt may have run: read tcp: i/o timeout)" {
		t.Errorf("error %q", got)
	}

	// A timeout as the last error says it by itself.
	calls = 0
	err = Again(context.Background(), func() error { calls++; return timeout }, Retry{})
	if calls != attempts || err != error(timeout) {
		t.Errorf("after %d attempts: %v, want %d attempts and the timeout itself", calls, err, attempts)
	}
}

func TestAgainWhileKeepsGoingAsLongAsAsked(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	const want = attempts + 2
	calls, befores := 0, 0
	err := Again(context.Background(), func() error {
		calls++
		if calls == want {
			return nil
		}
		return timeout
	}, Retry{While: func() bool { return true }, Before: func(mayHaveRun bool) {
		befores++
		if !mayHaveRun {
			t.Errorf("before the attempt after a timeout: told nothing may have run")
		}
	}})
	if err != nil || calls != want || befores != want-1 {
		t.Errorf("again: %v after %d attempts and %d calls of before, want nil after %d and %d", err, calls, befores, want, want-1)
	}

	// After refusals alone (Redis did not run the call), before is told
	// nothing may have run; once a timeout came, that something may have.
	refused := redisError("LOADING Redis is loading the dataset in memory")
	calls = 0
	var told []bool
	_ = Again(context.Background(), func() error {
		calls++
		switch calls {
		case 1, 2:
			return refused
		case 3:
			return timeout
		}
		return refused
	}, Retry{While: func() bool { return calls < 5 }, Before: func(mayHaveRun bool) { told = append(told, mayHaveRun) }})
	if want := []bool{false, false, true, true}; fmt.Sprint(told) != fmt.Sprint(want) {
		t.Errorf("before told %v, want %v", told, want)
	}

	calls = 0
	err = Again(context.Background(), func() error { calls++; return timeout }, Retry{While: func() bool { return calls < 2 }})
	if calls != 2 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("again: %v after %d attempts, want the timeout after 2 (while said stop)", err, calls)
	}
}

// TestRunOnceDoesNotRepeatALostReply: a script sent by runOnce with
// refusedOnly (a publish on Cluster) whose reply is lost runs once, and the
// caller gets an error that says it may have run; RunScript, for scripts
// safe to repeat, sends it again.
func TestRunOnceDoesNotRepeatALostReply(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	key := srv.Prefix(t) + "count"
	proxy := redistest.StartProxy(t, srv.Addr())
	client := goredis.NewClient(&goredis.Options{Addr: proxy.Addr(), ReadTimeout: 200 * time.Millisecond, PoolSize: 1})
	t.Cleanup(func() { _ = client.Close() })
	b := NewBatcher(client, Replicas{})
	t.Cleanup(b.Close)
	incr := goredis.NewScript(`return redis.call("INCR", KEYS[1])`)
	ctx := context.Background()
	if err := incr.Load(ctx, client).Err(); err != nil {
		t.Fatal(err)
	}
	direct := srv.Client(t)

	proxy.LoseReplyTo("evalsha")
	err := b.RunOnce(ctx, key, incr, []string{key}, nil, Retry{RefusedOnly: true}).Err()
	if !OutcomeUnknown(err) {
		t.Fatalf("runOnce with its reply lost: %v, want an error that leaves open whether it ran (count %s)", err, direct.Get(ctx, key).Val())
	}
	if n := direct.Get(ctx, key).Val(); n != "1" {
		t.Fatalf("the script ran %s times, want once", n)
	}

	proxy.LoseReplyTo("evalsha")
	if err := b.RunScript(ctx, key, incr, []string{key}).Err(); err != nil {
		t.Fatalf("RunScript with its reply lost: %v, want it sent again", err)
	}
	if n := direct.Get(ctx, key).Val(); n != "3" {
		t.Fatalf("after RunScript the count is %s, want 3 (it ran twice)", n)
	}
}
