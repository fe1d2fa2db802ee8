package integration_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func TestSendTask(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		for _, tc := range []struct {
			name string
			sig  *tasks.Signature
			want []interface{}
		}{
			{"add", sig("add", int64Arg(1), int64Arg(1)), []interface{}{int64(2)}},
			{"multiply", sig("multiply", int64Arg(2), int64Arg(3), int64Arg(4)), []interface{}{int64(24)}},
			{"sum_ints", sig("sum_ints", tasks.Arg{Type: "[]int64", Value: []int64{1, 2, 3}}), []interface{}{int64(6)}},
			{"sum_floats", sig("sum_floats", tasks.Arg{Type: "[]float64", Value: []float64{1.5, 2.5, 3.25}}), []interface{}{7.25}},
			{"concat", sig("concat", tasks.Arg{Type: "[]string", Value: []string{"foo", "bar"}}), []interface{}{"foobar"}},
			{"split", sig("split", strArg("abc")), []interface{}{[]string{"a", "b", "c"}}},
			{"bytes", sig("bytes", tasks.Arg{Type: "[]byte", Value: []byte("raw")}), []interface{}{"raw"}},
			{"multiple values and context", sig("multiple_values", int64Arg(21), strArg("ab")), []interface{}{int64(42), "abab"}},
			{"just an error", sig("just_error"), []interface{}{}},
		} {
			got, err := e.run(tc.sig)
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: got %#v, want %#v", tc.name, got, tc.want)
			}
		}
	})
}

func TestSendTaskStates(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		ctx := e.ctx()
		s := sig("add", int64Arg(2), int64Arg(3))
		res, err := e.server.SendTaskWithContext(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.UUID, "task_") || s.RoutingKey != config.DefaultQueueName {
			t.Errorf("SendTask left UUID %q RoutingKey %q", s.UUID, s.RoutingKey)
		}
		if _, err := res.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		st := res.GetState()
		if st.State != tasks.StateSuccess || st.TaskName != "add" || st.TaskUUID != s.UUID {
			t.Errorf("final state %+v", st)
		}
	})
}

func TestPanicBecomesTaskError(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		_, err := e.run(sig("panic"))
		if err == nil || err.Error() != "oops" {
			t.Fatalf("got error %v, want oops", err)
		}
	})
}

func TestFailureRunsOnError(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		s := sig("fail", strArg("boom"))
		s.OnError = []*tasks.Signature{sig("on_error", strArg("cb"))}
		_, err := e.run(s)
		var te *result.TaskError
		if !errors.As(err, &te) || te.Message != "boom" {
			t.Fatalf("got %v, want task error boom", err)
		}
		waitFor(t, "OnError callback", func() bool { return len(e.calls.times("on_error:cb:boom")) == 1 })
	})
}

func TestOnSuccessGetsResults(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		s := sig("split", strArg("xy"))
		s.OnSuccess = []*tasks.Signature{{Name: "concat", UUID: "task_onsuccess_" + t.Name()}}
		if _, err := e.run(s); err != nil {
			t.Fatal(err)
		}
		cb := result.NewAsyncResult(s.OnSuccess[0], e.server.GetBackend())
		waitFor(t, "OnSuccess state", func() bool {
			st := cb.GetState()
			return st.IsCompleted()
		})
		out, err := cb.GetWithContext(e.ctx(), poll)
		if err != nil || len(out) != 1 || out[0].Interface() != "xy" {
			t.Fatalf("OnSuccess concat got %v, %v; want xy", out, err)
		}
	})
}

func TestSendChain(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		got, err := e.runChain(
			sig("add", int64Arg(1), int64Arg(1)),
			sig("add", int64Arg(5), int64Arg(5)),
			sig("multiply", int64Arg(4)),
		)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []interface{}{int64(48)}) {
			t.Fatalf("chain result %v, want 48", got)
		}
	})
}

// TestPreTaskHandlerSeesCallbacks: the pre-publish handler runs on every
// task a chain publishes, the steps a worker sends as well as the first,
// and what it sets travels with the task.
func TestPreTaskHandlerSeesCallbacks(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		var mu sync.Mutex
		var seen []string
		e.server.SetPreTaskHandler(func(sig *tasks.Signature) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, sig.Name)
			sig.Headers["stamp"] = fmt.Sprintf("published %d", len(seen))
		})
		got, err := e.runChain(sig("add", int64Arg(1), int64Arg(2)), sig("add", int64Arg(3)), sig("stamp"))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []interface{}{"published 3"}) {
			t.Fatalf("chain result %v, want [published 3]", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"add", "add", "stamp"}; !reflect.DeepEqual(seen, want) {
			t.Fatalf("pre-publish handler saw %v, want %v", seen, want)
		}
	})
}

func TestChainImmutable(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		last := sig("add", int64Arg(7))
		last.Immutable = true
		got, err := e.runChain(sig("add", int64Arg(1), int64Arg(1)), last)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []interface{}{int64(7)}) {
			t.Fatalf("immutable member got %v, want 7 (no result appended)", got)
		}
	})
}

func TestChainStopsAtFailure(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		if _, err := e.runChain(sig("fail", strArg("first fails")), sig("record", strArg("never"))); err == nil || err.Error() != "first fails" {
			t.Fatalf("chain error %v, want first fails", err)
		}
		if n := len(e.calls.times("never")); n != 0 {
			t.Fatalf("second member ran %d times after the first failed", n)
		}
	})
}

func TestSendGroup(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		group, err := tasks.NewGroup(
			sig("add", int64Arg(1), int64Arg(1)),
			sig("add", int64Arg(2), int64Arg(2)),
			sig("add", int64Arg(5), int64Arg(6)),
		)
		if err != nil {
			t.Fatal(err)
		}
		ctx := e.ctx()
		results, err := e.server.SendGroupWithContext(ctx, group, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []int64{2, 4, 11}
		for i, r := range results {
			out, err := r.GetWithContext(ctx, poll)
			if err != nil {
				t.Fatal(err)
			}
			if got := values(out); !reflect.DeepEqual(got, []interface{}{want[i]}) {
				t.Errorf("member %d: %v, want %d", i, got, want[i])
			}
		}
	})
}

func TestSendChord(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		newEnv(t, p).runChordOf20(t)
	})
}

// runChordOf20 sends a chord of 20 multiplications summed by its callback
// and checks the sum.
func (e *env) runChordOf20(t *testing.T) {
	t.Helper()
	var members []*tasks.Signature
	var want int64
	for i := int64(1); i <= 20; i++ {
		members = append(members, sig("multiply", int64Arg(i), int64Arg(2)))
		want += 2 * i
	}
	group, err := tasks.NewGroup(members...)
	if err != nil {
		t.Fatal(err)
	}
	chord, err := tasks.NewChord(group, sig("add"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := e.ctx()
	res, err := e.server.SendChordWithContext(ctx, chord, 5)
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.GetWithContext(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(out); !reflect.DeepEqual(got, []interface{}{want}) {
		t.Fatalf("chord result %v, want %d", got, want)
	}
}

func TestChordCallbackGetsResultsInGroupOrder(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		var members []*tasks.Signature
		for _, s := range []string{"a", "b", "c", "d", "e", "f"} {
			members = append(members, sig("record", strArg(s)))
		}
		group, _ := tasks.NewGroup(members...)
		chord, _ := tasks.NewChord(group, sig("concat_args"))
		e.server.RegisterTask("concat_args", func(parts ...string) (string, error) { return strings.Join(parts, ""), nil })
		ctx := e.ctx()
		res, err := e.server.SendChordWithContext(ctx, chord, 0)
		if err != nil {
			t.Fatal(err)
		}
		out, err := res.GetWithContext(ctx, poll)
		if err != nil {
			t.Fatal(err)
		}
		if got := values(out); !reflect.DeepEqual(got, []interface{}{"abcdef"}) {
			t.Fatalf("callback got %v, want abcdef", got)
		}
	})
}

func TestChordMemberFailureRunsCallbackOnError(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		group, _ := tasks.NewGroup(
			sig("add", int64Arg(1)),
			sig("fail", strArg("member broke")),
			sig("add", int64Arg(2)),
		)
		callback := sig("add")
		callback.OnError = []*tasks.Signature{sig("on_error", strArg("chord"))}
		chord, _ := tasks.NewChord(group, callback)
		ctx := e.ctx()
		res, err := e.server.SendChordWithContext(ctx, chord, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.GetWithContext(ctx, poll); err == nil || err.Error() != "member broke" {
			t.Fatalf("chord Get error %v, want member broke", err)
		}
		waitFor(t, "chord OnError", func() bool { return len(e.calls.times("on_error:chord:member broke")) == 1 })
		// The callback itself did not run and says why.
		cb := res.CallbackResult()
		_, err = cb.GetWithContext(ctx, poll)
		if err == nil || !strings.Contains(err.Error(), "member broke") {
			t.Fatalf("callback result %v, want failure naming the member error", err)
		}
	})
}

func TestRetryCount(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 3s for Fibonacci retry timeouts (1s, 2s)")
	}
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		s := sig("flaky")
		s.RetryCount = 3
		got, err := e.run(s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []interface{}{int64(3)}) {
			t.Fatalf("got %v, want success on call 3", got)
		}
		calls := e.calls.times("flaky")
		if len(calls) != 3 {
			t.Fatalf("flaky ran %d times, want 3", len(calls))
		}
		// Fibonacci timeouts: 1s before the second call, 2s before the third.
		if d := calls[1].Sub(calls[0]); d < time.Second {
			t.Errorf("second call %v after the first, want >= 1s", d)
		}
		if d := calls[2].Sub(calls[1]); d < 2*time.Second {
			t.Errorf("third call %v after the second, want >= 2s", d)
		}
	})
}

func TestRetryCountExhausted(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		s := sig("fail", strArg("always"))
		s.RetryCount = 1
		s.RetryTimeout = 0
		_, err := e.run(s)
		if err == nil || err.Error() != "always" {
			t.Fatalf("got %v, want always", err)
		}
	})
}

func TestErrRetryTaskLaterWrapped(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		got, err := e.run(sig("retry_later"))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []interface{}{int64(3)}) {
			t.Fatalf("got %v, want success on call 3", got)
		}
	})
}

func TestDelayedTaskNeverEarly(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		eta := time.Now().Add(300 * time.Millisecond)
		s := sig("record", strArg("delayed"))
		s.ETA = &eta
		if _, err := e.run(s); err != nil {
			t.Fatal(err)
		}
		calls := e.calls.times("delayed")
		if len(calls) != 1 {
			t.Fatalf("delayed task ran %d times", len(calls))
		}
		if calls[0].Before(eta) {
			t.Fatalf("delayed task ran %v before its ETA", eta.Sub(calls[0]))
		}
	})
}

func TestTimeoutGivesContextDeadline(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		s := sig("deadline")
		s.Timeout = time.Minute
		got, err := e.run(s)
		if err != nil || !reflect.DeepEqual(got, []interface{}{true}) {
			t.Fatalf("with Timeout: %v, %v; want a deadline", got, err)
		}
		// An eager task runs inside SendTask, under the sender's context
		// and its deadline; a queued task's context has none of its own.
		if !p.eager {
			got, err = e.run(sig("deadline"))
			if err != nil || !reflect.DeepEqual(got, []interface{}{false}) {
				t.Fatalf("without Timeout: %v, %v; want no deadline", got, err)
			}
		}
		s = sig("sleep_ctx", int64Arg(10_000))
		s.Timeout = 50 * time.Millisecond
		if _, err := e.run(s); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
			t.Fatalf("task past its Timeout: %v, want deadline exceeded", err)
		}
	})
}

func TestBadArgumentsFailOnceAndAreArchived(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		for _, tc := range []struct {
			sig  *tasks.Signature
			want string
		}{
			{sig("add", strArg("one")), "cannot be used as int64"},
			{sig("split", int64Arg(1), int64Arg(2)), "got 2 args"},
			{sig("add", tasks.Arg{Type: "map", Value: 1}), "map is not one of supported types"},
		} {
			_, err := e.run(tc.sig)
			var te *result.TaskError
			if !errors.As(err, &te) || !strings.Contains(te.Message, tc.want) {
				t.Errorf("%s%v: got %v, want a task failure containing %q", tc.sig.Name, tc.sig.Args, err, tc.want)
			}
			if p.eager {
				continue
			}
			// FAILURE is written before the task is settled in the archive.
			waitFor(t, fmt.Sprintf("%s%v archived with its error", tc.sig.Name, tc.sig.Args), func() bool {
				archived, err := e.server.GetBroker().(brokers.Inspector).ListTasks(e.ctx(), config.DefaultQueueName, brokers.StatusArchived, 0, 100)
				if err != nil {
					t.Fatal(err)
				}
				for _, info := range archived {
					if info.Signature.UUID == tc.sig.UUID {
						return info.LastError == te.Message
					}
				}
				return false
			})
		}
	})
}

// TestGetIsWokenByCompletion: a result's wait ends when its task finishes,
// not at its next poll: with an hour between polls, a task's, a chain's and
// a chord's Get return within the test's deadline. On a Cluster results
// only poll (the state writes there do not announce themselves).
func TestGetIsWokenByCompletion(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		if p.name == "cluster" {
			t.Skip("on a Cluster, a result's wait polls")
		}
		e := newEnv(t, p)
		const hour = time.Hour
		ctx := e.ctx()

		res, err := e.server.SendTaskWithContext(ctx, sig("add", int64Arg(2), int64Arg(3)))
		if err != nil {
			t.Fatal(err)
		}
		out, err := res.GetWithContext(ctx, hour)
		if err != nil || !reflect.DeepEqual(values(out), []interface{}{int64(5)}) {
			t.Fatalf("task: %v, %v; want 5", values(out), err)
		}

		chain, err := tasks.NewChain(sig("add", int64Arg(1), int64Arg(1)), sig("multiply", int64Arg(3)))
		if err != nil {
			t.Fatal(err)
		}
		cres, err := e.server.SendChainWithContext(ctx, chain)
		if err != nil {
			t.Fatal(err)
		}
		out, err = cres.GetWithContext(ctx, hour)
		if err != nil || !reflect.DeepEqual(values(out), []interface{}{int64(6)}) {
			t.Fatalf("chain: %v, %v; want 6", values(out), err)
		}

		group, err := tasks.NewGroup(sig("add", int64Arg(1), int64Arg(2)), sig("add", int64Arg(3), int64Arg(4)))
		if err != nil {
			t.Fatal(err)
		}
		chord, err := tasks.NewChord(group, sig("add"))
		if err != nil {
			t.Fatal(err)
		}
		chres, err := e.server.SendChordWithContext(ctx, chord, 0)
		if err != nil {
			t.Fatal(err)
		}
		out, err = chres.GetWithContext(ctx, hour)
		if err != nil || !reflect.DeepEqual(values(out), []interface{}{int64(10)}) {
			t.Fatalf("chord: %v, %v; want 10", values(out), err)
		}
	})
}
