package rdb

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
)

// protoError returns msg as go-redis's own type for an error reply inside
// an array (proto.RedisError, internal to go-redis: the type of
// ErrNoScript).
func protoError(msg string) goredis.Error {
	return reflect.ValueOf(msg).Convert(reflect.TypeOf(goredis.ErrNoScript)).Interface().(goredis.Error)
}

// arr builds an array reply; as from go-redis, an empty one is not nil.
func arr(vs ...interface{}) []interface{} {
	if vs == nil {
		return []interface{}{}
	}
	return vs
}

// checkReplyError fails t unless err is what a parser returns for a
// malformed reply of reply: a *ReplyError wrapping ErrMalformedReply whose
// message names the reply.
func checkReplyError(t *testing.T, err error, reply string) {
	t.Helper()
	var re *ReplyError
	switch {
	case !errors.Is(err, ErrMalformedReply):
		t.Fatalf("error %v does not wrap ErrMalformedReply", err)
	case !errors.As(err, &re):
		t.Fatalf("error %v is no *ReplyError", err)
	case re.Reply != reply:
		t.Fatalf("error %v is about reply %q, want %q", err, re.Reply, reply)
	case !strings.HasPrefix(err.Error(), "rdb: malformed "+reply+" reply: "):
		t.Fatalf("error %q does not name the %s reply", err, reply)
	}
}

// replyCase is a reply and what its parser makes of it: want, or with bad
// an error about the reply whose message contains bad.
type replyCase struct {
	name string
	v    interface{}
	want interface{}
	bad  string
}

// testParser runs parse, a parser of reply wrapped to return one value, on
// every case.
func testParser(t *testing.T, reply string, parse func(interface{}) (interface{}, error), cases []replyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(tc.v)
			if tc.bad != "" {
				if err == nil {
					t.Fatalf("parsed %#v as %#v, want an error", tc.v, got)
				}
				checkReplyError(t, err, reply)
				if !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("error %q does not say %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse %#v: %v", tc.v, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parsed %#v as %#v, want %#v", tc.v, got, tc.want)
			}
		})
	}
}

// notArrays are replies of the wrong kind for a parser of arrays.
func notArrays() []replyCase {
	return []replyCase{
		{name: "nil", v: nil, bad: "the reply is nil, want an array"},
		{name: "integer", v: int64(0), bad: "the reply is integer 0"},
		{name: "string", v: "OK", bad: `the reply is string "OK"`},
		{name: "map", v: map[interface{}]interface{}{"a": int64(1)}, bad: "the reply is a map"},
	}
}

type codeID struct {
	code       int64
	id, holder string
}

func TestParseEnqueueReply(t *testing.T) {
	t.Parallel()
	testParser(t, "enqueue", func(v interface{}) (interface{}, error) {
		code, id, holder, err := parseEnqueueReply(v)
		return codeID{code, id, holder}, err
	}, append(notArrays(),
		replyCase{name: "published", v: arr(int64(0)), want: codeID{0, "", ""}},
		replyCase{name: "duplicate", v: arr(int64(1), "t1"), want: codeID{1, "t1", ""}},
		replyCase{name: "no aggregator", v: arr(int64(4), "t1"), want: codeID{4, "t1", ""}},
		replyCase{name: "not unique", v: arr(int64(5), "t2", "t1"), want: codeID{5, "t2", "t1"}},
		replyCase{name: "not unique without its holder", v: arr(int64(5), "t2"), bad: "status 5 in an array of 2"},
		replyCase{name: "replaced", v: arr(int64(6), "t2", "t1"), want: codeID{6, "t2", "t1"}},
		replyCase{name: "cancelled", v: arr(int64(7), "t2", "workflow cancelled"), want: codeID{7, "t2", "workflow cancelled"}},
		replyCase{name: "cancelled with no reason", v: arr(int64(7), "t2", ""), want: codeID{7, "t2", ""}},
		replyCase{name: "cancelled without its reason", v: arr(int64(7), "t2"), bad: "status 7 in an array of 2"},
		replyCase{name: "cancelled with a reason not a string", v: arr(int64(7), "t2", int64(1)), bad: "element 2 (reason) is int64 1"},
		replyCase{name: "not unique with an empty holder", v: arr(int64(5), "t2", ""), bad: "element 2 (holder id)"},
		replyCase{name: "no aggregator without its id", v: arr(int64(4)), bad: "status 4 in an array of 1"},
		replyCase{name: "empty", v: arr(), bad: "an empty array"},
		replyCase{name: "duplicate without its id", v: arr(int64(1)), bad: "status 1 in an array of 1"},
		replyCase{name: "published with an id", v: arr(int64(0), "t1"), bad: "status 0 in an array of 2"},
		replyCase{name: "unknown status", v: arr(int64(2)), bad: "status 2"},
		replyCase{name: "status as a string", v: arr("0"), bad: `element 0 (status) is string "0", want an integer`},
		replyCase{name: "id as an integer", v: arr(int64(1), int64(7)), bad: "element 1 (task id) is integer 7"},
		replyCase{name: "empty id", v: arr(int64(1), ""), bad: "element 1 (task id)"},
		replyCase{name: "nil id", v: arr(int64(1), nil), bad: "element 1 (task id) is nil"},
		replyCase{name: "nested", v: arr(arr(int64(0))), bad: "element 0 (status) is an array of 1"},
		replyCase{name: "error inside", v: arr(protoError("ERR boom")), bad: "element 0 (status) is a Redis error, want an integer: ERR boom"},
	))
}

// dequeueTask is one task's elements of a dequeue reply.
func dequeueTask(id, msg, retried, recovered, token, outcome interface{}) []interface{} {
	return arr(id, msg, retried, recovered, token, outcome)
}

// dequeueReply is a dequeue reply of tasks.
func dequeueReply(tasks ...[]interface{}) []interface{} {
	out := arr(int64(1700000000000))
	for _, t := range tasks {
		out = append(out, t...)
	}
	return out
}

func TestParseDequeueReply(t *testing.T) {
	t.Parallel()
	const msg = `{"UUID":"a","Name":"add"}`
	good := dequeueTask("a", msg, "0", "0", "tok0", "")
	parse := func(n int) func(interface{}) (interface{}, error) {
		return func(v interface{}) (interface{}, error) { return parseDequeueReply(v, n) }
	}
	testParser(t, "dequeue", parse(2), append(notArrays(),
		replyCase{name: "paused or empty", v: dequeueReply(), want: []dequeued(nil)},
		replyCase{name: "one task", v: dequeueReply(good), want: []dequeued{{id: "a", msg: msg, token: "tok0"}}},
		replyCase{name: "two tasks, counts and an outcome", v: dequeueReply(good, dequeueTask("b", "", "3", "12", "tok1", `{"State":"SUCCESS"}`)),
			want: []dequeued{{id: "a", msg: msg, token: "tok0"}, {id: "b", msg: "", retried: 3, recovered: 12, token: "tok1", outcome: `{"State":"SUCCESS"}`}}},
		replyCase{name: "more tasks than asked for", v: dequeueReply(good, good, good), bad: "3 tasks, more than the 2 asked for"},
		replyCase{name: "empty", v: arr(), bad: "an array of 0, want 1 + 6 per task"},
		replyCase{name: "a task cut short", v: append(dequeueReply(good), "b", msg), bad: "an array of 9"},
		replyCase{name: "no expiry", v: good, bad: "an array of 6"},
		replyCase{name: "expiry as a string", v: append(arr("1700000000000"), good...), bad: "element 0 (lease expiry)"},
		replyCase{name: "id as an integer", v: dequeueReply(dequeueTask(int64(5), msg, "0", "0", "t", "")), bad: "element 1 (task id) is integer 5"},
		replyCase{name: "empty id", v: dequeueReply(dequeueTask("", msg, "0", "0", "t", "")), bad: "element 1 (task id)"},
		replyCase{name: "nil message", v: dequeueReply(dequeueTask("a", nil, "0", "0", "t", "")), bad: "element 2 (message) is nil"},
		replyCase{name: "retried as an integer", v: dequeueReply(dequeueTask("a", msg, int64(1), "0", "t", "")), bad: "element 3 (retried) is integer 1"},
		replyCase{name: "retried not a number", v: dequeueReply(dequeueTask("a", msg, "x", "0", "t", "")), bad: `element 3 (retried) is string "x"`},
		replyCase{name: "negative recoveries", v: dequeueReply(dequeueTask("a", msg, "0", "-1", "t", "")), bad: "element 4 (recovered)"},
		replyCase{name: "no token", v: dequeueReply(dequeueTask("a", msg, "0", "0", "", "")), bad: "element 5 (fencing token)"},
		replyCase{name: "nil outcome", v: dequeueReply(dequeueTask("a", msg, "0", "0", "t", nil)), bad: "element 6 (outcome) is nil"},
		replyCase{name: "second task bad", v: dequeueReply(good, dequeueTask("b", msg, "0", "0", arr("t"), "")), bad: "element 11 (fencing token) is an array of 1"},
		replyCase{name: "error inside", v: dequeueReply(dequeueTask("a", protoError("ERR x"), "0", "0", "t", "")), bad: "element 2 (message) is a Redis error, want a string: ERR x"},
	))
	testParser(t, "dequeue", parse(0), []replyCase{
		{name: "none asked for", v: dequeueReply(), want: []dequeued(nil)},
		{name: "one when none asked for", v: dequeueReply(good), bad: "1 tasks, more than the 0 asked for"},
	})
}

func TestParseSettleTakeReply(t *testing.T) {
	t.Parallel()
	const msg = `{"UUID":"a","Name":"add"}`
	good := dequeueTask("a", msg, "0", "0", "tok0", "")
	type result struct {
		code  int64
		taken []dequeued
		took  bool
	}
	parse := func(v interface{}) (interface{}, error) {
		code, taken, took, err := parseSettleTakeReply("ack", v)
		return result{code, taken, took}, err
	}
	testParser(t, "ack", parse, []replyCase{
		{name: "refused", v: int64(2), want: result{code: statusLeaseLost}},
		{name: "settled before, nothing taken", v: int64(0), want: result{code: statusOK}},
		{name: "settled, none pending", v: arr(int64(0), int64(1700000000000)), want: result{code: statusOK, took: true}},
		{name: "settled, one taken", v: append(arr(int64(0), int64(1700000000000)), good...),
			want: result{code: statusOK, taken: []dequeued{{id: "a", msg: msg, token: "tok0"}}, took: true}},
		{name: "unknown status", v: int64(3), bad: "status 3"},
		{name: "nil", v: nil, bad: "the reply is nil"},
		{name: "empty", v: arr(), bad: "an array of 0, want 2 + 6 per task"},
		{name: "refused in an array", v: arr(int64(2), int64(1700000000000)), bad: "status 2 in an array, want 0"},
		{name: "status as a string", v: arr("0", int64(1700000000000)), bad: "element 0 (status)"},
		{name: "no expiry", v: arr(int64(0)), bad: "an array of 1, want 2 + 6 per task"},
		{name: "two taken", v: append(append(arr(int64(0), int64(1700000000000)), good...), good...), bad: "2 tasks, more than the 1 asked for"},
		{name: "task bad", v: append(arr(int64(0), int64(1700000000000)), dequeueTask("a", msg, "0", "0", "", "")...), bad: "element 6 (fencing token)"},
	})
}

// claimBatchReply is a claim_batch reply of a batch: its head, then
// members, each an id and a message.
func claimBatchReply(members ...interface{}) []interface{} {
	return append(arr("b1", "notify", "alice", "tok", int64(1700000000000), int64(1), int64(2), ""), members...)
}

func TestParseClaimBatchReply(t *testing.T) {
	t.Parallel()
	const msg = `{"UUID":"a","Name":"notify"}`
	head := claimBatchReply()
	with := func(i int, v interface{}) []interface{} {
		r := claimBatchReply("a", msg)
		r[i] = v
		return r
	}
	testParser(t, "claim_batch", func(v interface{}) (interface{}, error) { return parseClaimBatchReply(v) }, append(notArrays(),
		replyCase{name: "nothing due", v: arr(), want: (*claimedBatch)(nil)},
		replyCase{name: "a batch", v: claimBatchReply("a", msg, "b", ""), want: &claimedBatch{id: "b1", name: "notify", key: "alice", token: "tok",
			failed: 1, recovered: 2, members: []claimedMember{{"a", msg}, {"b", ""}}}},
		replyCase{name: "a batch handed over", v: with(7, msg), want: &claimedBatch{id: "b1", name: "notify", key: "alice", token: "tok",
			failed: 1, recovered: 2, handed: msg, members: []claimedMember{{"a", msg}}}},
		replyCase{name: "no member", v: head, bad: "an array of 8, want 8 + 2 per member"},
		replyCase{name: "a member cut short", v: claimBatchReply("a", msg, "b"), bad: "an array of 11"},
		replyCase{name: "short head", v: arr("b1", "notify", "alice"), bad: "an array of 3"},
		replyCase{name: "empty id", v: with(0, ""), bad: "element 0 (batch id)"},
		replyCase{name: "name as an integer", v: with(1, int64(3)), bad: "element 1 (task name) is integer 3"},
		replyCase{name: "empty key", v: with(2, ""), bad: "element 2 (aggregation key)"},
		replyCase{name: "no token", v: with(3, nil), bad: "element 3 (fencing token) is nil"},
		replyCase{name: "expiry as a string", v: with(4, "1700000000000"), bad: "element 4 (lease expiry)"},
		replyCase{name: "failed as a string", v: with(5, "1"), bad: "element 5 (failed)"},
		replyCase{name: "negative recoveries", v: with(6, int64(-1)), bad: "failed 1, recovered -1"},
		replyCase{name: "handed nil", v: with(7, nil), bad: "element 7 (handed aggregate) is nil"},
		replyCase{name: "member id empty", v: with(8, ""), bad: "element 8 (task id)"},
		replyCase{name: "message nil", v: with(9, nil), bad: "element 9 (message) is nil"},
		replyCase{name: "error inside", v: with(9, protoError("ERR x")), bad: "element 9 (message) is a Redis error, want a string: ERR x"},
	))
}

func TestParseExtendReply(t *testing.T) {
	t.Parallel()
	testParser(t, "extend", func(v interface{}) (interface{}, error) { return parseExtendReply(v) }, append(notArrays(),
		replyCase{name: "all kept", v: arr(int64(1700000000000)), want: []string(nil)},
		replyCase{name: "some lost", v: arr(int64(1700000000000), "a", "c"), want: []string{"a", "c"}},
		replyCase{name: "empty", v: arr(), bad: "an empty array"},
		replyCase{name: "no expiry", v: arr("a", "b"), bad: `element 0 (lease expiry) is string "a"`},
		replyCase{name: "lost id as an integer", v: arr(int64(1), "a", int64(2)), bad: "element 2 (task id) is integer 2"},
		replyCase{name: "lost id nil", v: arr(int64(1), nil), bad: "element 1 (task id) is nil"},
		replyCase{name: "error inside", v: arr(int64(1), protoError("ERR x")), bad: "element 1 (task id) is a Redis error"},
	))
}

type codeCount struct{ code, n int64 }

func TestParseCommitReply(t *testing.T) {
	t.Parallel()
	testParser(t, "commit", func(v interface{}) (interface{}, error) {
		code, finished, err := parseCommitReply(v)
		return codeCount{code, finished}, err
	}, append(notArrays(),
		replyCase{name: "done", v: arr(int64(0), int64(0)), want: codeCount{0, 0}},
		replyCase{name: "done in a group", v: arr(int64(0), int64(3)), want: codeCount{0, 3}},
		replyCase{name: "lease lost", v: arr(int64(2)), want: codeCount{2, 0}},
		replyCase{name: "empty", v: arr(), bad: "an empty array"},
		replyCase{name: "done without the count", v: arr(int64(0)), bad: "status 0 in an array of 1"},
		replyCase{name: "lost with a count", v: arr(int64(2), int64(0)), bad: "status 2 in an array of 2"},
		replyCase{name: "unknown status", v: arr(int64(1)), bad: "status 1"},
		replyCase{name: "negative count", v: arr(int64(0), int64(-1)), bad: "-1 members finished"},
		replyCase{name: "count as a string", v: arr(int64(0), "1"), bad: "element 1 (members finished)"},
		replyCase{name: "status nil", v: arr(nil, int64(0)), bad: "element 0 (status) is nil"},
	))
}

func TestParseRequeueReply(t *testing.T) {
	t.Parallel()
	testParser(t, "requeue", func(v interface{}) (interface{}, error) { return parseRequeueReply(v) }, append(notArrays(),
		replyCase{name: "none lost", v: arr(), want: []string(nil)},
		replyCase{name: "some lost", v: arr("b", "a"), want: []string{"b", "a"}},
		replyCase{name: "id as an integer", v: arr("a", int64(1)), bad: "element 1 (task id) is integer 1"},
		replyCase{name: "empty id", v: arr(""), bad: `element 0 (task id) is string ""`},
		replyCase{name: "nested", v: arr(arr("a")), bad: "element 0 (task id) is an array of 1"},
	))
}

type forwardResult struct{ moved, next, stranded int64 }

type codeVal struct {
	code int64
	val  string
}

func TestParseTakeWaitingReply(t *testing.T) {
	t.Parallel()
	testParser(t, "take_waiting", func(v interface{}) (interface{}, error) {
		code, val, err := parseTakeWaitingReply(v)
		return codeVal{code, val}, err
	}, append(notArrays(),
		replyCase{name: "done", v: arr(int64(0), `{"UUID":"a"}`), want: codeVal{0, `{"UUID":"a"}`}},
		replyCase{name: "not found", v: arr(int64(1)), want: codeVal{1, ""}},
		replyCase{name: "not waiting", v: arr(int64(2), "active"), want: codeVal{2, "active"}},
		replyCase{name: "empty", v: arr(), bad: "an empty array"},
		replyCase{name: "done without its message", v: arr(int64(0)), bad: "status 0 in an array of 1"},
		replyCase{name: "not found with more", v: arr(int64(1), "x"), bad: "status 1 in an array of 2"},
		replyCase{name: "empty state", v: arr(int64(2), ""), bad: "want a non-empty string"},
		replyCase{name: "state as an integer", v: arr(int64(2), int64(3)), bad: "want a non-empty string"},
		replyCase{name: "unknown status", v: arr(int64(7), "x"), bad: "status 7"},
	))
}

func TestParseCancelReply(t *testing.T) {
	t.Parallel()
	testParser(t, "cancel", func(v interface{}) (interface{}, error) {
		code, val, err := parseCancelReply(v)
		return codeVal{code, val}, err
	}, append(notArrays(),
		replyCase{name: "deleted", v: arr(int64(0), `{"UUID":"a"}`), want: codeVal{0, `{"UUID":"a"}`}},
		replyCase{name: "running", v: arr(int64(3), `{"UUID":"a"}`), want: codeVal{3, `{"UUID":"a"}`}},
		replyCase{name: "not found", v: arr(int64(1)), want: codeVal{1, ""}},
		replyCase{name: "cannot be", v: arr(int64(2), "batched"), want: codeVal{2, "batched"}},
		replyCase{name: "empty", v: arr(), bad: "an empty array"},
		replyCase{name: "running without its message", v: arr(int64(3)), bad: "status 3 in an array of 1"},
		replyCase{name: "empty state", v: arr(int64(2), ""), bad: "want a non-empty string"},
		replyCase{name: "kept out", v: arr(int64(4)), want: codeVal{4, ""}},
		replyCase{name: "unknown status", v: arr(int64(4), "x"), bad: "status 4"},
	))
}

func TestParseForwardReply(t *testing.T) {
	t.Parallel()
	testParser(t, "forward", func(v interface{}) (interface{}, error) {
		moved, next, stranded, err := parseForwardReply(v)
		return forwardResult{moved, next, stranded}, err
	}, append(notArrays(),
		replyCase{name: "nothing waiting", v: arr(int64(0), int64(-1), int64(0)), want: forwardResult{0, -1, 0}},
		replyCase{name: "moved, more due later", v: arr(int64(1000), int64(1700000000000), int64(0)), want: forwardResult{1000, 1700000000000, 0}},
		replyCase{name: "members stranded", v: arr(int64(7), int64(-1), int64(5)), want: forwardResult{7, -1, 5}},
		replyCase{name: "short", v: arr(int64(3), int64(-1)), bad: "an array of 2"},
		replyCase{name: "long", v: arr(int64(3), int64(-1), int64(0), int64(0)), bad: "an array of 4"},
		replyCase{name: "negative moved", v: arr(int64(-1), int64(-1), int64(0)), bad: "{-1, -1, 0}"},
		replyCase{name: "next before -1", v: arr(int64(0), int64(-2), int64(0)), bad: "{0, -2, 0}"},
		replyCase{name: "more stranded than moved", v: arr(int64(1), int64(-1), int64(2)), bad: "{1, -1, 2}"},
		replyCase{name: "negative stranded", v: arr(int64(1), int64(-1), int64(-1)), bad: "{1, -1, -1}"},
		replyCase{name: "next as a string", v: arr(int64(0), "-1", int64(0)), bad: "element 1 (next due)"},
		replyCase{name: "stranded as a string", v: arr(int64(0), int64(-1), "0"), bad: "element 2 (members stranded)"},
		replyCase{name: "a float", v: arr(1.5, int64(-1), int64(0)), bad: "element 0 (tasks moved) is a float64"},
	))
}

type recoverResult struct{ recovered, archived []string }

func TestParseUnrouteReply(t *testing.T) {
	t.Parallel()
	testParser(t, "unroute", func(v interface{}) (interface{}, error) {
		moved, more, err := parseUnrouteReply(v)
		return [2]interface{}{moved, more}, err
	}, append(notArrays(),
		replyCase{name: "nothing", v: arr(int64(0), int64(0)), want: [2]interface{}{int64(0), false}},
		replyCase{name: "a batch, more to come", v: arr(int64(1000), int64(1)), want: [2]interface{}{int64(1000), true}},
		replyCase{name: "short", v: arr(int64(3)), bad: "an array of 1"},
		replyCase{name: "negative moved", v: arr(int64(-1), int64(0)), bad: "{-1, 0}"},
		replyCase{name: "more out of range", v: arr(int64(1), int64(2)), bad: "{1, 2}"},
		replyCase{name: "more as a string", v: arr(int64(0), "1"), bad: "element 1 (more)"},
	))
}

func TestParseRecoverReply(t *testing.T) {
	t.Parallel()
	testParser(t, "recover", func(v interface{}) (interface{}, error) {
		recovered, archived, err := parseRecoverReply(v)
		return recoverResult{recovered, archived}, err
	}, append(notArrays(),
		replyCase{name: "nothing", v: arr("|"), want: recoverResult{}},
		replyCase{name: "recovered only", v: arr("a", "b", "|"), want: recoverResult{recovered: []string{"a", "b"}}},
		replyCase{name: "archived only", v: arr("|", "c"), want: recoverResult{archived: []string{"c"}}},
		replyCase{name: "both", v: arr("a", "|", "c", "d"), want: recoverResult{[]string{"a"}, []string{"c", "d"}}},
		replyCase{name: "empty", v: arr(), bad: `no "|" in an array of 0`},
		replyCase{name: "no separator", v: arr("a", "b"), bad: `no "|" in an array of 2`},
		replyCase{name: "two separators", v: arr("a", "|", "b", "|"), bad: `a second "|" at element 3 (the first at 1)`},
		replyCase{name: "id as an integer", v: arr(int64(1), "|"), bad: "element 0 (task id) is integer 1"},
		replyCase{name: "archived id nil", v: arr("|", nil), bad: "element 1 (task id) is nil"},
		replyCase{name: "error inside", v: arr("|", protoError("ERR x")), bad: "element 1 (task id) is a Redis error"},
	))
}

func TestParseElectReply(t *testing.T) {
	t.Parallel()
	testParser(t, "elect", func(v interface{}) (interface{}, error) { return parseElectReply(v) }, []replyCase{
		{name: "won", v: int64(1), want: true},
		{name: "another holds it", v: int64(0), want: false},
		{name: "unknown", v: int64(2), bad: "status 2, want one of [0 1]"},
		{name: "string", v: "1", bad: `the reply is string "1", want an integer`},
		{name: "array", v: arr(int64(1)), bad: "the reply is an array of 1"},
		{name: "nil", v: nil, bad: "the reply is nil"},
		{name: "bool", v: true, bad: "the reply is a bool"},
	})
}

func TestParseStatusReply(t *testing.T) {
	t.Parallel()
	testParser(t, "ack", func(v interface{}) (interface{}, error) {
		return parseStatusReply("ack", v, statusOK, statusLeaseLost)
	}, []replyCase{
		{name: "done", v: int64(0), want: int64(0)},
		{name: "lease lost", v: int64(2), want: int64(2)},
		{name: "not ack's", v: int64(1), bad: "status 1, want one of [0 2]"},
		{name: "string", v: "0", bad: `the reply is string "0"`},
		{name: "array", v: arr(int64(0)), bad: "the reply is an array of 1"},
	})
	testParser(t, "complete_batch", func(v interface{}) (interface{}, error) {
		return parseStatusReply("complete_batch", v, statusOK, statusLeaseLost, statusDuplicate)
	}, []replyCase{
		{name: "done", v: int64(0), want: int64(0)},
		{name: "duplicate aggregate", v: int64(1), want: int64(1)},
		{name: "lease lost", v: int64(2), want: int64(2)},
		{name: "unknown", v: int64(3), bad: "status 3, want one of [0 2 1]"},
	})
	testParser(t, "trigger_chord", func(v interface{}) (interface{}, error) {
		return parseStatusReply("trigger_chord", v, chordLost, chordElected, chordNotFound)
	}, []replyCase{
		{name: "elected", v: int64(1), want: int64(1)},
		{name: "not found", v: int64(2), want: int64(2)},
		{name: "unknown", v: int64(3), bad: "status 3"},
		{name: "negative", v: int64(-1), bad: "status -1"},
	})
}

func TestParseCountReply(t *testing.T) {
	t.Parallel()
	testParser(t, "group_done", func(v interface{}) (interface{}, error) { return parseCountReply("group_done", v) }, []replyCase{
		{name: "zero", v: int64(0), want: int64(0)},
		{name: "some", v: int64(42), want: int64(42)},
		{name: "negative", v: int64(-1), bad: "a count of -1"},
		{name: "string", v: "3", bad: `the reply is string "3"`},
		{name: "nil", v: nil, bad: "the reply is nil"},
	})
}

func TestParseBlpopReply(t *testing.T) {
	t.Parallel()
	keys := []string{"p:{a}:notify", "p:{b}:notify"}
	testParser(t, "BLPOP", func(v interface{}) (interface{}, error) { return parseBlpopReply(v, keys) }, append(notArrays(),
		replyCase{name: "token", v: arr("p:{b}:notify", "1"), want: "p:{b}:notify"},
		replyCase{name: "another key", v: arr("p:{c}:notify", "1"), bad: `key "p:{c}:notify" is none of the 2 keys waited on`},
		replyCase{name: "no value", v: arr("p:{a}:notify"), bad: "an array of 1"},
		replyCase{name: "empty", v: arr(), bad: "an array of 0"},
		replyCase{name: "key as an integer", v: arr(int64(1), "1"), bad: "element 0 (key) is integer 1"},
		replyCase{name: "value nil", v: arr("p:{a}:notify", nil), bad: "element 1 (value) is nil"},
	))
}

func TestParseTaskFields(t *testing.T) {
	t.Parallel()
	testParser(t, "HMGET task hash", func(v interface{}) (interface{}, error) {
		vals, _ := v.([]interface{})
		return parseTaskFields(vals)
	}, []replyCase{
		{name: "gone", v: arr(nil, nil, nil, nil, nil, nil, nil, nil), want: taskFields{}},
		{name: "pending", v: arr("{}", nil, nil, nil, nil, nil, nil, nil), want: taskFields{msg: "{}"}},
		{name: "retried", v: arr("{}", "2", "1", "boom", "1700000000000", "1700000005000", nil, nil),
			want: taskFields{msg: "{}", retried: 2, recovered: 1, lastError: "boom", hasError: true, failedAt: 1700000000000, processAt: 1700000005000}},
		{name: "empty error", v: arr("{}", nil, nil, "", nil, nil, nil, nil), want: taskFields{msg: "{}", hasError: true}},
		{name: "short", v: arr("{}", nil), bad: "an array of 2, want 8 fields"},
		{name: "none", v: arr(), bad: "an array of 0"},
		{name: "msg as an integer", v: arr(int64(1), nil, nil, nil, nil, nil, nil, nil), bad: "element 0 (msg) is integer 1"},
		{name: "retried not a number", v: arr("{}", "two", nil, nil, nil, nil, nil, nil), bad: `element 1 (retried) is string "two"`},
		{name: "recovered negative", v: arr("{}", nil, "-3", nil, nil, nil, nil, nil), bad: "element 2 (recovered)"},
		{name: "error as an array", v: arr("{}", nil, nil, arr(), nil, nil, nil, nil), bad: "element 3 (error) is an array of 0"},
		{name: "failed_at a float", v: arr("{}", nil, nil, nil, "1.5e12", nil, nil, nil), bad: "element 4 (failed_at)"},
		{name: "process_at an error", v: arr("{}", nil, nil, nil, nil, protoError("WRONGTYPE"), nil, nil), bad: "element 5 (process_at) is a Redis error, want a decimal string: WRONGTYPE"},
		{name: "active", v: arr("{}", nil, nil, nil, nil, nil, "active", "1700000009000"),
			want: taskFields{msg: "{}", state: "active", leaseExp: 1700000009000}},
		{name: "state as an integer", v: arr("{}", nil, nil, nil, nil, nil, int64(2), nil), bad: "element 6 (state) is integer 2"},
		{name: "lease_exp negative", v: arr("{}", nil, nil, nil, nil, nil, "active", "-1"), bad: "element 7 (lease_exp)"},
	})
}

type groupMeta struct {
	members []string
	found   bool
}

func TestParseGroupMeta(t *testing.T) {
	t.Parallel()
	testParser(t, "HMGET group hash", func(v interface{}) (interface{}, error) {
		vals, _ := v.([]interface{})
		members, found, err := parseGroupMeta(vals)
		return groupMeta{members, found}, err
	}, []replyCase{
		{name: "no bookkeeping", v: arr(nil, nil), want: groupMeta{}},
		{name: "uuids without a count", v: arr(`["a"]`, nil), want: groupMeta{}},
		{name: "no InitGroup", v: arr(nil, "3"), want: groupMeta{found: true}},
		{name: "members", v: arr(`["a","b"]`, "2"), want: groupMeta{[]string{"a", "b"}, true}},
		{name: "no members", v: arr(`[]`, "0"), want: groupMeta{[]string{}, true}},
		{name: "short", v: arr(nil), bad: "an array of 1, want {uuids, count}"},
		{name: "count as an integer", v: arr(nil, int64(2)), bad: "element 1 (count) is integer 2"},
		{name: "uuids as an integer", v: arr(int64(1), "2"), bad: "element 0 (uuids) is integer 1"},
		{name: "uuids not JSON", v: arr(`["a"`, "1"), bad: "element 0 (uuids) is not a JSON array of strings: unexpected end of JSON input"},
		{name: "uuids not strings", v: arr(`[1]`, "1"), bad: "element 0 (uuids) is not a JSON array of strings"},
	})
}

func TestReplyErrorWrapsARedisErrorInside(t *testing.T) {
	t.Parallel()
	inner := protoError("ERR inner")
	_, _, _, err := parseEnqueueReply(arr(int64(1), inner))
	var rerr goredis.Error
	if !errors.As(err, &rerr) || rerr.Error() != "ERR inner" {
		t.Fatalf("error %v does not wrap the Redis error inside the reply", err)
	}
	checkReplyError(t, err, "enqueue")
}

// The fuzz targets decode their bytes into a reply, a tree of the values
// go-redis gives (decodeReply), and check that the parsers never panic and
// either fail with a *ReplyError or return what the reply holds.

// Tags of the reply encoding: each value is a tag byte, then its content.
const (
	tagNil        = iota
	tagSmallInt   // one byte, an int8
	tagInt        // eight bytes, big-endian
	tagString     // a length byte, then the bytes
	tagArray      // a length byte, then the elements
	tagRedisError // a length byte, then the message
	tagFloat      // eight bytes, big-endian IEEE 754 (RESP3 double)
	tagBool       // one byte, its low bit (RESP3 boolean)
	tagMap        // a length byte, then string keys and values (RESP3 map)
	tagCount
)

// maxReplyDepth bounds the nesting of decoded arrays and maps.
const maxReplyDepth = 4

// replyDecoder decodes a reply from bytes. Every byte string decodes to a
// reply: a missing byte reads as 0, an unknown tag modulo tagCount, and an
// array or map ends early where the bytes end, so a reply has at most as
// many values as its input has bytes.
type replyDecoder struct{ data []byte }

func decodeReply(data []byte) interface{} {
	d := &replyDecoder{data: data}
	return d.value(0)
}

func (d *replyDecoder) byte() byte {
	if len(d.data) == 0 {
		return 0
	}
	b := d.data[0]
	d.data = d.data[1:]
	return b
}

func (d *replyDecoder) bytes(n int) []byte {
	n = min(n, len(d.data))
	b := d.data[:n]
	d.data = d.data[n:]
	return b
}

func (d *replyDecoder) uint64() uint64 {
	var b [8]byte
	copy(b[:], d.bytes(8))
	return binary.BigEndian.Uint64(b[:])
}

func (d *replyDecoder) string() string { return string(d.bytes(int(d.byte()))) }

func (d *replyDecoder) value(depth int) interface{} {
	if len(d.data) == 0 {
		return nil
	}
	switch d.byte() % tagCount {
	case tagSmallInt:
		return int64(int8(d.byte()))
	case tagInt:
		return int64(d.uint64())
	case tagString:
		return d.string()
	case tagArray:
		n := int(d.byte())
		out := make([]interface{}, 0, min(n, len(d.data)))
		for len(out) < n && len(d.data) > 0 && depth < maxReplyDepth {
			out = append(out, d.value(depth+1))
		}
		return out
	case tagRedisError:
		return protoError(d.string())
	case tagFloat:
		return math.Float64frombits(d.uint64())
	case tagBool:
		return d.byte()&1 == 1
	case tagMap:
		n := int(d.byte())
		out := make(map[interface{}]interface{})
		for i := 0; i < n && len(d.data) > 0 && depth < maxReplyDepth; i++ {
			k := d.string()
			out[k] = d.value(depth + 1)
		}
		return out
	}
	return nil
}

// encodeReply is decodeReply's inverse, for the seed corpus: strings of at
// most 255 bytes, arrays of at most 255 elements.
func encodeReply(tb testing.TB, v interface{}) []byte {
	tb.Helper()
	var b []byte
	str := func(s string) {
		if len(s) > math.MaxUint8 {
			tb.Fatalf("encodeReply: a string of %d bytes", len(s))
		}
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	var enc func(v interface{})
	enc = func(v interface{}) {
		switch v := v.(type) {
		case nil:
			b = append(b, tagNil)
		case goredis.Error:
			b = append(b, tagRedisError)
			str(v.Error())
		case int64:
			if v == int64(int8(v)) {
				b = append(b, tagSmallInt, byte(int8(v)))
			} else {
				b = append(b, tagInt)
				b = binary.BigEndian.AppendUint64(b, uint64(v))
			}
		case string:
			b = append(b, tagString)
			str(v)
		case []interface{}:
			if len(v) > math.MaxUint8 {
				tb.Fatalf("encodeReply: an array of %d", len(v))
			}
			b = append(b, tagArray, byte(len(v)))
			for _, e := range v {
				enc(e)
			}
		case float64:
			b = append(b, tagFloat)
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
		case bool:
			b = append(b, tagBool, 0)
			if v {
				b[len(b)-1] = 1
			}
		default:
			tb.Fatalf("encodeReply: a %T", v)
		}
	}
	enc(v)
	return b
}

// wellFormed are replies of the shapes the scripts and commands return,
// and a few near misses: the seed corpus of every fuzz target.
func wellFormed() []interface{} {
	const msg = `{"UUID":"a","Name":"add","RoutingKey":"q"}`
	return []interface{}{
		// enqueue, commit, forward, elect, statuses, counts
		arr(int64(0)), arr(int64(1), "a"), arr(int64(0), int64(2)), arr(int64(2)),
		arr(int64(1000), int64(1700000000000)), arr(int64(0), int64(-1)),
		int64(0), int64(1), int64(2), int64(17),
		// dequeue
		dequeueReply(),
		dequeueReply(dequeueTask("a", msg, "0", "0", "tok0", "")),
		dequeueReply(dequeueTask("a", msg, "0", "1", "tok0", `{"State":"SUCCESS"}`), dequeueTask("b", msg, "2", "0", "tok1", "")),
		append(dequeueReply(dequeueTask("a", msg, "0", "0", "tok0", "")), "b"),
		// extend, requeue, recover
		arr(int64(1700000000000), "a", "b"), arr(), arr("a", "b"),
		arr("|"), arr("a", "|", "b"), arr("a", "|", "|"),
		// BLPOP, HMGET
		arr("k1", "1"),
		arr(msg, "1", "0", "boom", "1700000000000", nil), arr(nil, nil, nil, nil, nil, nil),
		arr(`["a","b"]`, "2"), arr(nil, "2"), arr(nil, nil),
		// malformed
		arr(int64(0), protoError("ERR x")), nil, "OK", 1.5, true,
	}
}

func TestReplyCodecRoundTrip(t *testing.T) {
	t.Parallel()
	for _, v := range wellFormed() {
		data := encodeReply(t, v)
		if got := decodeReply(data); !reflect.DeepEqual(got, v) {
			t.Errorf("decodeReply(encodeReply(%#v)) = %#v", v, got)
		}
	}
}

func addSeeds(f *testing.F, add func(data []byte)) {
	f.Helper()
	for _, v := range wellFormed() {
		add(encodeReply(f, v))
	}
}

// decimal is how a parser reads a field Redis stores as text.
func decimal(t *testing.T, v interface{}) int {
	t.Helper()
	s, _ := v.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("accepted %#v as a decimal", v)
	}
	return clampInt(n)
}

// strs returns the elements of vs as strings, failing t for one that is
// not a string that is not empty.
func strs(t *testing.T, vs []interface{}) []string {
	t.Helper()
	var out []string
	for _, v := range vs {
		s, ok := v.(string)
		if !ok || s == "" {
			t.Fatalf("accepted %#v as a task id", v)
		}
		out = append(out, s)
	}
	return out
}

func FuzzDequeueReply(f *testing.F) {
	addSeeds(f, func(data []byte) { f.Add(uint8(2), data) })
	f.Fuzz(func(t *testing.T, n uint8, data []byte) {
		v := decodeReply(data)
		got, err := parseDequeueReply(v, int(n))
		if err != nil {
			checkReplyError(t, err, "dequeue")
			return
		}
		// Every task of the reply is returned, in its order, with what the
		// reply says of it.
		a := v.([]interface{})
		if _, ok := a[0].(int64); !ok || len(a) != 1+len(got)*dequeueStride || len(got) > int(n) {
			t.Fatalf("parsed %#v (asked for %d) as %d tasks", v, n, len(got))
		}
		for i, d := range got {
			e := a[1+i*dequeueStride : 1+(i+1)*dequeueStride]
			want := dequeued{id: strs(t, e[:1])[0], msg: e[1].(string), retried: decimal(t, e[2]), recovered: decimal(t, e[3]),
				token: strs(t, e[4:5])[0], outcome: e[5].(string)}
			if d != want || d.retried < 0 || d.recovered < 0 {
				t.Fatalf("task %d of %#v parsed as %+v", i, v, d)
			}
		}
	})
}

func FuzzIDReplies(f *testing.F) {
	addSeeds(f, func(data []byte) { f.Add(data) })
	f.Fuzz(func(t *testing.T, data []byte) {
		v := decodeReply(data)
		if lost, err := parseExtendReply(v); err != nil {
			checkReplyError(t, err, "extend")
		} else if a := v.([]interface{}); !isInt(a[0]) || !slices.Equal(lost, strs(t, a[1:])) {
			t.Fatalf("extend reply %#v parsed as lost %q", v, lost)
		}
		if lost, err := parseRequeueReply(v); err != nil {
			checkReplyError(t, err, "requeue")
		} else if !slices.Equal(lost, strs(t, v.([]interface{}))) {
			t.Fatalf("requeue reply %#v parsed as lost %q", v, lost)
		}
		if recovered, archived, err := parseRecoverReply(v); err != nil {
			checkReplyError(t, err, "recover")
		} else {
			// The reply is the recovered ids, "|", the archived ids.
			all := append(append(append([]string{}, recovered...), recoverSeparator), archived...)
			if !slices.Equal(all, strs(t, v.([]interface{}))) || slices.Contains(recovered, recoverSeparator) || slices.Contains(archived, recoverSeparator) {
				t.Fatalf("recover reply %#v parsed as %q, %q", v, recovered, archived)
			}
		}
		if c, err := parseClaimBatchReply(v); err != nil {
			checkReplyError(t, err, "claim_batch")
		} else if a := v.([]interface{}); c == nil {
			if len(a) != 0 {
				t.Fatalf("claim_batch reply %#v parsed as no batch", v)
			}
		} else {
			got := arr(c.id, c.name, c.key, c.token, a[4], int64(c.failed), int64(c.recovered), c.handed)
			for _, m := range c.members {
				got = append(got, m.id, m.msg)
			}
			if !reflect.DeepEqual(got, a) || !isInt(a[4]) || len(c.members) == 0 || c.id == "" || c.key == "" {
				t.Fatalf("claim_batch reply %#v parsed as %+v", v, c)
			}
		}
	})
}

func isInt(v interface{}) bool { _, ok := v.(int64); return ok }

func FuzzScalarReplies(f *testing.F) {
	addSeeds(f, func(data []byte) { f.Add(data) })
	keys := []string{"k1", "k2"}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := decodeReply(data)
		a, _ := v.([]interface{})
		if code, id, holder, err := parseEnqueueReply(v); err != nil {
			checkReplyError(t, err, "enqueue")
		} else if !(code == 0 && reflect.DeepEqual(a, arr(int64(0))) && id == "") &&
			!((code == 1 || code == 4) && reflect.DeepEqual(a, arr(code, id)) && id != "") &&
			!((code == 5 || code == 6) && reflect.DeepEqual(a, arr(code, id, holder)) && id != "" && holder != "") &&
			!(code == 7 && reflect.DeepEqual(a, arr(code, id, holder)) && id != "") {
			t.Fatalf("enqueue reply %#v parsed as %d, %q, %q", v, code, id, holder)
		}
		if code, val, err := parseCancelReply(v); err != nil {
			checkReplyError(t, err, "cancel")
		} else if !((code == 1 || code == 4) && reflect.DeepEqual(a, arr(code)) && val == "") &&
			!((code == 0 || code == 2 || code == 3) && reflect.DeepEqual(a, arr(code, val)) && val != "") {
			t.Fatalf("cancel reply %#v parsed as %d, %q", v, code, val)
		}
		if code, val, err := parseTakeWaitingReply(v); err != nil {
			checkReplyError(t, err, "take_waiting")
		} else if !(code == 1 && reflect.DeepEqual(a, arr(int64(1))) && val == "") &&
			!((code == 0 || code == 2) && reflect.DeepEqual(a, arr(code, val)) && val != "") {
			t.Fatalf("take_waiting reply %#v parsed as %d, %q", v, code, val)
		}
		if code, finished, err := parseCommitReply(v); err != nil {
			checkReplyError(t, err, "commit")
		} else if !(code == 0 && reflect.DeepEqual(a, arr(int64(0), finished)) && finished >= 0) &&
			!(code == 2 && reflect.DeepEqual(a, arr(int64(2))) && finished == 0) {
			t.Fatalf("commit reply %#v parsed as %d, %d", v, code, finished)
		}
		if moved, next, stranded, err := parseForwardReply(v); err != nil {
			checkReplyError(t, err, "forward")
		} else if !reflect.DeepEqual(a, arr(moved, next, stranded)) || moved < 0 || next < -1 || stranded < 0 || stranded > moved {
			t.Fatalf("forward reply %#v parsed as %d, %d, %d", v, moved, next, stranded)
		}
		if won, err := parseElectReply(v); err != nil {
			checkReplyError(t, err, "elect")
		} else if won && v != int64(1) || !won && v != int64(0) {
			t.Fatalf("elect reply %#v parsed as %v", v, won)
		}
		if code, err := parseStatusReply("ack", v, statusOK, statusLeaseLost); err != nil {
			checkReplyError(t, err, "ack")
		} else if v != code || code != statusOK && code != statusLeaseLost {
			t.Fatalf("ack reply %#v parsed as %d", v, code)
		}
		if n, err := parseCountReply("delete_archived", v); err != nil {
			checkReplyError(t, err, "delete_archived")
		} else if v != n || n < 0 {
			t.Fatalf("delete_archived reply %#v parsed as %d", v, n)
		}
		if key, err := parseBlpopReply(v, keys); err != nil {
			checkReplyError(t, err, "BLPOP")
		} else if len(a) != 2 || a[0] != key || !isString(a[1]) || !slices.Contains(keys, key) {
			t.Fatalf("BLPOP reply %#v parsed as %q", v, key)
		}
	})
}

func isString(v interface{}) bool { _, ok := v.(string); return ok }

func FuzzFieldReplies(f *testing.F) {
	addSeeds(f, func(data []byte) { f.Add(data) })
	f.Fuzz(func(t *testing.T, data []byte) {
		v := decodeReply(data)
		vals, ok := v.([]interface{})
		if !ok {
			vals = arr(v)
		}
		str := func(v interface{}) string { s, _ := v.(string); return s }
		num := func(v interface{}) int {
			if v == nil {
				return 0
			}
			return decimal(t, v)
		}
		if f, err := parseTaskFields(vals); err != nil {
			checkReplyError(t, err, "HMGET task hash")
		} else {
			want := taskFields{msg: str(vals[0]), retried: num(vals[1]), recovered: num(vals[2]), lastError: str(vals[3]),
				hasError: vals[3] != nil, failedAt: int64(num(vals[4])), processAt: int64(num(vals[5])),
				state: str(vals[6]), leaseExp: int64(num(vals[7]))}
			if len(vals) != len(taskInfoFields) || f != want || f.retried < 0 || f.recovered < 0 || f.failedAt < 0 || f.processAt < 0 || f.leaseExp < 0 {
				t.Fatalf("task fields %#v parsed as %+v", vals, f)
			}
			for _, v := range vals {
				if v != nil && !isString(v) {
					t.Fatalf("task fields %#v: accepted %#v", vals, v)
				}
			}
		}
		if members, found, err := parseGroupMeta(vals); err != nil {
			checkReplyError(t, err, "HMGET group hash")
		} else {
			var want []string
			if found && vals[0] != nil {
				if err := json.Unmarshal([]byte(vals[0].(string)), &want); err != nil {
					t.Fatalf("group fields %#v: accepted uuids that do not decode: %v", vals, err)
				}
			}
			if len(vals) != 2 || found != (vals[1] != nil) || found && !isString(vals[1]) || !reflect.DeepEqual(members, want) {
				t.Fatalf("group fields %#v parsed as %q, %v", vals, members, found)
			}
		}
	})
}

// TestParsersReadRealReplies runs every script whose reply is parsed, in
// each of the shapes it returns, on a real Redis over RESP2 and RESP3, and
// parses its reply: a script and its parser cannot drift apart.
func TestParsersReadRealReplies(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	for _, protocol := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(protocol), func(t *testing.T) {
			t.Parallel()
			client := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Protocol: protocol})
			t.Cleanup(func() { _ = client.Close() })
			testRealReplies(t, client, strings.TrimSuffix(srv.Prefix(t), ":"))
		})
	}
}

func testRealReplies(t *testing.T, client *goredis.Client, prefix string) {
	ctx := context.Background()
	k := &keys{prefix: prefix}
	qk := k.queue("q")
	const ttl = int64(time.Hour / time.Millisecond)
	run := func(script *goredis.Script, keys []string, args ...interface{}) interface{} {
		t.Helper()
		v, err := script.Run(ctx, client, keys, args...).Result()
		if err != nil {
			t.Fatalf("run script: %v", err)
		}
		return v
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	msg := func(id string) string { return `{"UUID":"` + id + `","Name":"n","RoutingKey":"q"}` }
	queueKeys := []string{qk.pending, qk.scheduled, qk.archived, qk.notify}
	later := time.Now().Add(time.Hour).UnixMilli()
	sentAt := time.Now().UnixMilli() // enqueue.lua's ARGV[3], the sender's clock

	// enqueue: {0}, then {1, id}.
	code, id, _, err := parseEnqueueReply(onlyReply(t, run(enqueueScript, queueKeys, qk.task, "0", sentAt, "pub1", "0", 3,
		"a", msg("a"), 0, "", "", "", "", "b", msg("b"), 0, "", "", "", "", "c", msg("c"), later, "", "", "", "")))
	if err != nil || code != statusOK || id != "" {
		t.Fatalf("enqueue: %d, %q, %v", code, id, err)
	}
	code, id, _, err = parseEnqueueReply(onlyReply(t, run(enqueueScript, queueKeys, qk.task, "0", sentAt, "pub2", "0", 1, "a", msg("a"), 0, "", "", "", "")))
	if err != nil || code != statusDuplicate || id != "a" {
		t.Fatalf("enqueue again: %d, %q, %v", code, id, err)
	}

	// get_state: a task its queue holds, with no state: PENDING, made
	// from its message and send time; none: nil; a state hash: its fields.
	must(client.SAdd(ctx, k.queues(), "q").Err())
	getStateIn := func(queue, id string) map[string]string {
		t.Helper()
		fields, err := parseGetStateReply(run(getStateScript, []string{k.state(id), k.queues()}, k.prefix+":{", id, queue))
		if err != nil {
			t.Fatalf("get_state %s: %v", id, err)
		}
		return fields
	}
	getState := func(id string) map[string]string { t.Helper(); return getStateIn("", id) }
	if f := getState("c"); f["state"] != "PENDING" || f["name"] != "n" || f["created_at"] == "" {
		t.Fatalf("get_state of a scheduled task: %v; want PENDING, named n, with created_at", f)
	}
	if f := getState("nobody"); f != nil {
		t.Fatalf("get_state of no task: %v; want nil", f)
	}
	// A queue the queues set does not list is read only when named.
	must(client.HSet(ctx, k.queue("elsewhere").task+"h", "msg", msg("h"), "state", "pending").Err())
	if f := getState("h"); f != nil {
		t.Fatalf("get_state of a task in an unlisted queue, not named: %v; want nil", f)
	}
	if f := getStateIn("elsewhere", "h"); f["state"] != "PENDING" {
		t.Fatalf("get_state of a task in the queue named: %v; want PENDING", f)
	}
	must(client.HSet(ctx, qk.task+"z", "msg", msg("z"), "state", "archived", "error", "boom").Err())
	if f := getState("z"); f["state"] != "FAILURE" || f["error"] != "boom" || f["name"] != "n" {
		t.Fatalf("get_state of an archived task with no state: %v; want FAILURE boom", f)
	}
	must(client.Del(ctx, qk.task+"z").Err())
	// A marker keeping out a task cancelled while it waited (it keeps
	// when the task was sent): FAILURE; one keeping out a task not sent
	// yet: nothing.
	must(client.HSet(ctx, qk.task+"w", "state", "cancelled", "error", "cancelled by an operator", "at", 1000).Err())
	if f := getState("w"); f["state"] != "FAILURE" || f["error"] != "cancelled by an operator" || f["created_at"] != "1000" {
		t.Fatalf("get_state of a task cancelled while it waited: %v; want FAILURE, cancelled, created at 1000", f)
	}
	must(client.HSet(ctx, qk.task+"u", "state", "cancelled", "error", "cancelled by an operator").Err())
	if f := getState("u"); f != nil {
		t.Fatalf("get_state of a task kept out before it was sent: %v; want nil", f)
	}
	must(client.Del(ctx, qk.task+"w", qk.task+"u").Err())
	must(client.HSet(ctx, k.state("x"), "state", "STARTED", "name", "n").Err())
	if f := getState("x"); f["state"] != "STARTED" || f["name"] != "n" {
		t.Fatalf("get_state of a state hash: %v", f)
	}

	// dequeue: tasks, then {expiry} when paused.
	dequeueKeys := []string{qk.pending, qk.paused, qk.lease, qk.notify}
	taken, err := parseDequeueReply(run(dequeueScript, dequeueKeys, qk.task, 2, ttl, "tokA", "tokB"), 2)
	want := []dequeued{{id: "a", msg: msg("a"), token: "tokA"}, {id: "b", msg: msg("b"), token: "tokB"}}
	if err != nil || !reflect.DeepEqual(taken, want) {
		t.Fatalf("dequeue: %+v, %v; want %+v", taken, err, want)
	}
	must(client.Set(ctx, qk.paused, 1, 0).Err())
	taken, err = parseDequeueReply(run(dequeueScript, dequeueKeys, qk.task, 2, ttl, "x", "y"), 2)
	if err != nil || taken != nil {
		t.Fatalf("dequeue from a paused queue: %+v, %v", taken, err)
	}
	must(client.Del(ctx, qk.paused).Err())

	// forward: nothing due, then c made due.
	forwardKeys := []string{qk.scheduled, qk.retry, qk.pending, qk.notify, qk.paused}
	moved, next, _, err := parseForwardReply(run(forwardScript, forwardKeys, qk.task, forwardBatch, 0))
	if in := (later - time.Now().UnixMilli()) * 1000; err != nil || moved != 0 || next > in+1e6 || next < in-1e6 {
		t.Fatalf("forward: %d, %d, %v; want 0, about %d (µs until c is due)", moved, next, err, in)
	}
	must(client.ZAdd(ctx, qk.scheduled, goredis.Z{Score: 1, Member: "c"}).Err())
	moved, next, _, err = parseForwardReply(run(forwardScript, forwardKeys, qk.task, forwardBatch, 0))
	if err != nil || moved != 1 || next != -1 {
		t.Fatalf("forward c: %d, %d, %v; want 1, -1", moved, next, err)
	}
	taken, err = parseDequeueReply(run(dequeueScript, dequeueKeys, qk.task, 5, ttl, "tokC", "2", "3", "4", "5"), 5)
	if err != nil || len(taken) != 1 || taken[0].id != "c" || taken[0].token != "tokC" {
		t.Fatalf("dequeue c: %+v, %v", taken, err)
	}
	taken, err = parseDequeueReply(run(dequeueScript, dequeueKeys, qk.task, 1, ttl, "x"), 1)
	if err != nil || taken != nil {
		t.Fatalf("dequeue from an empty queue: %+v, %v", taken, err)
	}

	// extend: one kept, one lost.
	lost, err := parseExtendReply(run(extendScript, []string{qk.lease}, qk.task, ttl, "a", "tokA", "b", "wrong"))
	if err != nil || !slices.Equal(lost, []string{"b"}) {
		t.Fatalf("extend: %q, %v", lost, err)
	}

	// commit: {0, finished} with a group, {2} for a lease not held.
	g := k.group("g")
	outcome := `{"TaskUUID":"a","State":"SUCCESS"}`
	commitKeys := append([]string{qk.task + "a", k.state("a")}, g.all()...)
	commitArgs := []interface{}{"a", "tokA", outcome, ttl, formatTime(time.Now()), 2, ttl, ttl, "state", "SUCCESS"}
	code, finished, err := parseCommitReply(run(commitScript, commitKeys, commitArgs...))
	if err != nil || code != statusOK || finished != 1 {
		t.Fatalf("commit: %d, %d, %v", code, finished, err)
	}
	code, finished, err = parseCommitReply(run(commitScript, []string{qk.task + "b"}, "b", "wrong", "", ttl, "", 0, ttl, ttl))
	if err != nil || code != statusLeaseLost || finished != 0 {
		t.Fatalf("commit without the lease: %d, %d, %v", code, finished, err)
	}

	// requeue: a back to pending, b lost; then a comes back with its outcome.
	lost, err = parseRequeueReply(run(requeueScript, []string{qk.pending, qk.lease, qk.notify}, "0", qk.task, "a", "tokA", "b", "wrong"))
	if err != nil || !slices.Equal(lost, []string{"b"}) {
		t.Fatalf("requeue: %q, %v", lost, err)
	}
	lost, err = parseRequeueReply(run(requeueScript, []string{qk.pending, qk.lease, qk.notify}, "0", qk.task))
	if err != nil || lost != nil {
		t.Fatalf("requeue of nothing: %q, %v", lost, err)
	}
	taken, err = parseDequeueReply(run(dequeueScript, dequeueKeys, qk.task, 1, ttl, "tokA2"), 1)
	if err != nil || len(taken) != 1 || taken[0].id != "a" || taken[0].outcome != outcome {
		t.Fatalf("dequeue a again: %+v, %v", taken, err)
	}

	// ack, ack_success: 0, then 2.
	ackKeys := []string{qk.task + "a", qk.lease, qk.completed}
	for _, tc := range []struct {
		token string
		want  int64
	}{{"tokA2", statusOK}, {"tokA2", statusLeaseLost}} {
		code, err := parseStatusReply("ack", run(ackScript, ackKeys, "0", "a", tc.token, 0), statusOK, statusLeaseLost)
		if err != nil || code != tc.want {
			t.Fatalf("ack: %d, %v; want %d", code, err, tc.want)
		}
	}
	ackSuccessKeys := []string{qk.task + "c", qk.lease, qk.completed, k.state("c")}
	for _, tc := range []struct {
		token string
		want  int64
	}{{"wrong", statusLeaseLost}, {"tokC", statusOK}} {
		v := run(ackSuccessScript, ackSuccessKeys, "0", "c", tc.token, 0, ttl, "", "", 0, ttl, ttl, "0", 0, "0", 2, "state", "SUCCESS", "", "", 0)
		code, err := parseStatusReply("ack_success", v, statusOK, statusLeaseLost)
		if err != nil || code != tc.want {
			t.Fatalf("ack_success: %d, %v; want %d", code, err, tc.want)
		}
	}

	// ack with a take: {0, expiry, the task taken}; run again, 0 (the
	// first run's task is the caller's to put back); refused, 2.
	must(client.HSet(ctx, qk.task+"e", "msg", `{"UUID":"e","Name":"add"}`, "state", "active", "lease", "tokE", "lease_exp", time.Now().Add(time.Hour).UnixMilli()).Err())
	must(client.ZAdd(ctx, qk.lease, goredis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "e"}).Err())
	must(client.HSet(ctx, qk.task+"f", "msg", `{"UUID":"f","Name":"add"}`, "state", "pending").Err())
	must(client.RPush(ctx, qk.pending, "f").Err())
	takeKeys := []string{qk.task + "e", qk.lease, qk.completed, qk.pending, qk.paused, qk.notify}
	code, taken, took, err := parseSettleTakeReply("ack", run(ackScript, takeKeys, "0", "e", "tokE", 0, qk.task, ttl, "tokF"))
	if err != nil || code != statusOK || !took || len(taken) != 1 || taken[0].id != "f" || taken[0].token != "tokF" {
		t.Fatalf("ack with a take: %d, %+v, %v, %v; want f taken", code, taken, took, err)
	}
	code, taken, took, err = parseSettleTakeReply("ack", run(ackScript, takeKeys, "1", "e", "tokE", 0, qk.task, ttl, "tokF2"))
	if err != nil || code != statusOK || took || taken != nil {
		t.Fatalf("ack with a take, run again: %d, %+v, %v, %v; want 0 and nothing taken", code, taken, took, err)
	}
	code, _, took, err = parseSettleTakeReply("ack", run(ackScript, takeKeys, "0", "e", "tokE", 0, qk.task, ttl, "tokF3"))
	if err != nil || code != statusLeaseLost || took {
		t.Fatalf("ack with a take, refused: %d, %v, %v; want 2", code, took, err)
	}
	must(client.Del(ctx, qk.task+"f").Err())
	must(client.ZRem(ctx, qk.lease, "f").Err())

	// recover: b (lease expired) back to pending; then b again, archived.
	recoverKeys := []string{qk.lease, qk.pending, qk.archived, qk.notify}
	must(client.ZAdd(ctx, qk.lease, goredis.Z{Score: 1, Member: "b"}).Err())
	recovered, archived, err := parseRecoverReply(run(recoverScript, recoverKeys, qk.task, recoverBatch, -1, "expired"))
	if err != nil || !slices.Equal(recovered, []string{"b"}) || archived != nil {
		t.Fatalf("recover: %q, %q, %v", recovered, archived, err)
	}
	recovered, archived, err = parseRecoverReply(run(recoverScript, recoverKeys, qk.task, recoverBatch, -1, "expired"))
	if err != nil || recovered != nil || archived != nil {
		t.Fatalf("recover of nothing: %q, %q, %v", recovered, archived, err)
	}
	if _, err := parseDequeueReply(run(dequeueScript, dequeueKeys, qk.task, 1, ttl, "tokB2"), 1); err != nil {
		t.Fatal(err)
	}
	must(client.ZAdd(ctx, qk.lease, goredis.Z{Score: 1, Member: "b"}).Err())
	recovered, archived, err = parseRecoverReply(run(recoverScript, recoverKeys, qk.task, recoverBatch, 0, "expired"))
	if err != nil || recovered != nil || !slices.Equal(archived, []string{"b"}) {
		t.Fatalf("recover to the archive: %q, %q, %v", recovered, archived, err)
	}

	// HMGET of a task hash: archived b, and a task that is gone.
	fields, err := parseTaskFields(client.HMGet(ctx, qk.task+"b", taskInfoFields...).Val())
	if err != nil || fields.msg != msg("b") || fields.recovered != 2 || !fields.hasError || fields.failedAt <= 0 {
		t.Fatalf("task fields of b: %+v, %v", fields, err)
	}
	fields, err = parseTaskFields(client.HMGet(ctx, qk.task+"gone", taskInfoFields...).Val())
	if err != nil || fields != (taskFields{}) {
		t.Fatalf("task fields of a task that is gone: %+v, %v", fields, err)
	}

	// requeue_archived, delete_archived: counts.
	n, err := parseCountReply("requeue_archived", run(requeueArchivedScript, []string{qk.archived, qk.pending, qk.notify}, qk.task, "b"))
	if err != nil || n != 1 {
		t.Fatalf("requeue_archived: %d, %v", n, err)
	}
	n, err = parseCountReply("delete_archived", run(deleteArchivedScript, []string{qk.archived}, qk.task))
	if err != nil || n != 0 {
		t.Fatalf("delete_archived: %d, %v", n, err)
	}

	// unroute: nothing rerouted, then one name whose announcement ended
	// with 3 tasks, put back 2 at a time.
	unrouteKeys := []string{qk.rerouted, qk.handlers, qk.pending, qk.notify}
	if moved, more, err := parseUnrouteReply(run(unrouteScript, unrouteKeys, qk.task, 2)); err != nil || moved != 0 || more {
		t.Fatalf("unroute of nothing: %d, %v, %v", moved, more, err)
	}
	must(client.RPush(ctx, qk.rerouted+":gone", "r1", "r2", "r3").Err())
	must(client.SAdd(ctx, qk.rerouted, "gone").Err())
	if moved, more, err := parseUnrouteReply(run(unrouteScript, unrouteKeys, qk.task, 2)); err != nil || moved != 2 || !more {
		t.Fatalf("first unroute: %d, %v, %v; want 2, true", moved, more, err)
	}
	if moved, more, err := parseUnrouteReply(run(unrouteScript, unrouteKeys, qk.task, 2)); err != nil || moved != 1 || more {
		t.Fatalf("second unroute: %d, %v, %v; want 1, false", moved, more, err)
	}

	// elect: 1, then 0 for another holder.
	for _, tc := range []struct {
		holder string
		want   bool
	}{{"h1", true}, {"h1", true}, {"h2", false}} {
		won, err := parseElectReply(run(electScript, []string{qk.maintainer}, tc.holder, ttl))
		if err != nil || won != tc.want {
			t.Fatalf("elect %s: %v, %v; want %v", tc.holder, won, err, tc.want)
		}
	}

	// group_done, trigger_chord and HMGET of the group hash.
	h := k.group("h")
	meta := func(g groupKeys) ([]string, bool, error) {
		return parseGroupMeta(client.HMGet(ctx, g.meta, "uuids", "count").Val())
	}
	if members, found, err := meta(h); err != nil || found || members != nil {
		t.Fatalf("group meta of no group: %q, %v, %v", members, found, err)
	}
	chord, err := parseStatusReply("trigger_chord", run(triggerChordScript, h.all(), "m1", ttl, ttl), chordLost, chordElected, chordNotFound)
	if err != nil || chord != chordNotFound {
		t.Fatalf("trigger_chord of no group: %d, %v", chord, err)
	}
	n, err = parseCountReply("group_done", run(groupDoneScript, h.all(), "m1", `{"State":"SUCCESS"}`, 2, formatTime(time.Now()), ttl, ttl))
	if err != nil || n != 1 {
		t.Fatalf("group_done: %d, %v", n, err)
	}
	if members, found, err := meta(h); err != nil || !found || members != nil {
		t.Fatalf("group meta without InitGroup: %q, %v, %v", members, found, err)
	}
	must(initGroupScript.Run(ctx, client, h.all(), `["m1","m2"]`, 2, formatTime(time.Now()), ttl, ttl).Err())
	if members, found, err := meta(h); err != nil || !found || !slices.Equal(members, []string{"m1", "m2"}) {
		t.Fatalf("group meta: %q, %v, %v", members, found, err)
	}
	for _, tc := range []struct {
		member string
		want   int64
	}{{"m2", chordElected}, {"m1", chordLost}, {"m2", chordElected}} {
		chord, err := parseStatusReply("trigger_chord", run(triggerChordScript, h.all(), tc.member, ttl, ttl), chordLost, chordElected, chordNotFound)
		if err != nil || chord != tc.want {
			t.Fatalf("trigger_chord by %s: %d, %v; want %d", tc.member, chord, err, tc.want)
		}
	}

	// Aggregation. enqueue: {4, id} for a member no worker aggregates;
	// announce_aggregators: 0; claim_batch: {} for other names, then a
	// batch; the batch settles: 0, then 2 (and complete_batch 1 for an
	// aggregate the queue holds).
	aggKeys := []string{qk.aggPolicies, qk.aggGroups}
	member := func(id string) string {
		return `{"UUID":"` + id + `","Name":"agg","RoutingKey":"q","AggregationKey":"k"}`
	}
	grp := aggGroupID("agg", "k")
	code, id, _, err = parseEnqueueReply(onlyReply(t, run(enqueueScript, queueKeys, qk.task, "0", sentAt, "pub3", "0", 1, "m1", member("m1"), 0, grp, "", "", "")))
	if err != nil || code != statusNoAggregator || id != "m1" {
		t.Fatalf("enqueue of a member no worker aggregates: %d, %q, %v", code, id, err)
	}
	if code, err := parseStatusReply("announce_aggregators", run(announceAggregatorsScript, aggKeys, qk.agg, ttl, "agg", "2 0 0"), 0); err != nil || code != 0 {
		t.Fatalf("announce_aggregators: %d, %v", code, err)
	}
	code, id, _, err = parseEnqueueReply(onlyReply(t, run(enqueueScript, queueKeys, qk.task, "0", sentAt, "pub3", "0", 3,
		"m1", member("m1"), 0, grp, "", "", "", "m2", member("m2"), 0, grp, "", "", "", "m3", member("m3"), 0, grp, "", "", "")))
	if err != nil || code != statusOK {
		t.Fatalf("enqueue of members: %d, %q, %v", code, id, err)
	}
	claim := func(token, batchID string, names ...interface{}) *claimedBatch {
		t.Helper()
		c, err := parseClaimBatchReply(run(claimBatchScript, append(aggKeys, qk.paused), append([]interface{}{qk.agg, qk.task, ttl, token, batchID}, names...)...))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := claim("x", "x", "other"); c != nil {
		t.Fatalf("claim_batch of other names: %+v", c)
	}
	c := claim("btok", "batch1", "other", "agg")
	wantBatch := &claimedBatch{id: "batch1", name: "agg", key: "k", token: "btok", members: []claimedMember{{"m1", member("m1")}, {"m2", member("m2")}}}
	if !reflect.DeepEqual(c, wantBatch) {
		t.Fatalf("claim_batch: %+v, want %+v", c, wantBatch)
	}
	batchKeys := []string{qk.aggBatch("batch1"), qk.aggBatches("agg")}
	settle := func(script string, code int64, v interface{}) {
		t.Helper()
		got, err := parseStatusReply(script, v, statusOK, statusLeaseLost, statusDuplicate)
		if err != nil || got != code {
			t.Fatalf("%s: %d, %v; want %d", script, got, err, code)
		}
	}
	settle("retry_batch", statusOK, run(retryBatchScript, batchKeys, "0", "batch1", "btok", 1, "boom"))
	settle("retry_batch", statusLeaseLost, run(retryBatchScript, batchKeys, "0", "batch1", "btok", 1, "boom"))
	c = claim("btok2", "unused", "agg")
	wantBatch.token, wantBatch.failed = "btok2", 1
	if !reflect.DeepEqual(c, wantBatch) {
		t.Fatalf("claim_batch of the batch retried: %+v, want %+v", c, wantBatch)
	}
	completeKeys := func(aggregate string) []string {
		return append(batchKeys, qk.aggCount, qk.task+aggregate, qk.pending, qk.scheduled, qk.archived, qk.notify)
	}
	settle("complete_batch", statusDuplicate, run(completeBatchScript, completeKeys("m3"), "0", "batch1", "btok2", qk.task, "m3", member("m3"), 0, "", ""))
	settle("complete_batch", statusLeaseLost, run(completeBatchScript, completeKeys("agg1"), "0", "batch1", "btok", qk.task, "agg1", msg("agg1"), 0, "", ""))
	settle("complete_batch", statusOK, run(completeBatchScript, completeKeys("agg1"), "0", "batch1", "btok2", qk.task, "agg1", msg("agg1"), 0, "", ""))
	settle("complete_batch", statusOK, run(completeBatchScript, completeKeys("agg1"), "1", "batch1", "btok2", qk.task, "agg1", msg("agg1"), 0))
	code, id, _, err = parseEnqueueReply(onlyReply(t, run(enqueueScript, queueKeys, qk.task, "0", sentAt, "pub4", "0", 1, "m4", member("m4"), 0, grp, "", "", "")))
	if err != nil || code != statusOK {
		t.Fatalf("enqueue of a member: %d, %q, %v", code, id, err)
	}
	if c := claim("btok3", "batch2", "agg"); c == nil || c.id != "batch2" || len(c.members) != 2 {
		t.Fatalf("claim_batch of m3 and m4: %+v", c)
	}
	archiveKeys := []string{qk.aggBatch("batch2"), qk.aggBatches("agg"), qk.aggCount, qk.archived}
	settle("archive_batch", statusOK, run(archiveBatchScript, archiveKeys, "0", "batch2", "btok3", "dead", ttl, 100, qk.task))
	settle("archive_batch", statusLeaseLost, run(archiveBatchScript, archiveKeys, "0", "batch2", "btok3", "dead", ttl, 100, qk.task))

	// BLPOP of a wake-up token.
	must(client.Del(ctx, qk.notify).Err())
	must(client.LPush(ctx, qk.notify, "1").Err())
	waited := []string{k.queue("other").notify, qk.notify}
	key, err := parseBlpopReply(client.Do(ctx, "blpop", waited[0], waited[1], "0.1").Val(), waited)
	if err != nil || key != qk.notify {
		t.Fatalf("BLPOP: %q, %v", key, err)
	}

	// A Redis error inside an array comes as the type the fuzz targets
	// decode.
	v, err := client.Eval(ctx, `return {1, redis.error_reply("ERR inside")}`, nil).Result()
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := v.([]interface{}); !ok || len(a) != 2 || reflect.TypeOf(a[1]) != reflect.TypeOf(protoError("")) {
		t.Fatalf("a Redis error inside an array came as %#v", v)
	}
	_, _, _, err = parseEnqueueReply(v)
	checkReplyError(t, err, "enqueue")
}

// onlyReply returns the one element of a script's array reply (enqueue's
// reply to a single publish).
func onlyReply(t *testing.T, v interface{}) interface{} {
	t.Helper()
	arr, ok := v.([]interface{})
	if !ok || len(arr) != 1 {
		t.Fatalf("reply %#v, want an array of one", v)
	}
	return arr[0]
}

// TestEnqueueReadsTheServerClockOnlyWhenItMust: a task due now records
// the sender's clock as when it was sent, and its publish reads no TIME;
// a call that also has a member and a task with an ETA reads TIME once,
// for both.
func TestEnqueueReadsTheServerClockOnlyWhenItMust(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // its own: commandstats counts every client's TIME
	client := srv.Client(t)
	ctx := context.Background()
	qk := (&keys{prefix: "m"}).queue("q")
	queueKeys := []string{qk.pending, qk.scheduled, qk.archived, qk.notify}
	times := func() int {
		t.Helper()
		info := client.Info(ctx, "commandstats").Val()
		for _, l := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(l, "cmdstat_time:calls="); ok {
				n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		return 0
	}
	enqueue := func(args ...interface{}) {
		t.Helper()
		v, err := enqueueScript.Run(ctx, client, queueKeys, append([]interface{}{qk.task, "0", "1000"}, args...)...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range v.([]interface{}) {
			if code, id, _, err := parseEnqueueReply(r); err != nil || code != statusOK {
				t.Fatalf("publish: %d %s, %v", code, id, err)
			}
		}
	}
	before := times()
	enqueue("pub1", "0", 1, "a", `{"Name":"n"}`, 0, "", "", "", "")
	if n := times() - before; n != 0 {
		t.Errorf("a task due now: %d TIME calls, want 0", n)
	}
	if at := client.HGet(ctx, qk.task+"a", "at").Val(); at != "1000" {
		t.Errorf("its at = %q, want the sender's clock, 1000", at)
	}

	if err := client.HSet(ctx, qk.aggPolicies, "agg", "9999999999999 100 0 0").Err(); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour).UnixMilli()
	before = times()
	enqueue("pub2", "0", 1, "b", `{"Name":"n"}`, 0, "", "", "", "",
		"pub3", "0", 1, "m", `{"Name":"agg"}`, 0, aggGroupID("agg", "k"), "", "", "",
		"pub4", "0", 1, "c", `{"Name":"n"}`, later, "", "", "", "")
	if n := times() - before; n != 1 {
		t.Errorf("a task due now, a member and a task with an ETA: %d TIME calls, want 1", n)
	}
	joined, _ := strconv.ParseInt(client.HGet(ctx, qk.task+"m", "joined").Val(), 10, 64)
	at := client.HGet(ctx, qk.task+"c", "at").Val()
	if at == "1000" || strconv.FormatInt(joined/1000, 10) != at {
		t.Errorf("member joined at %d ms, the ETA task's at %s: want both the server's clock", joined/1000, at)
	}
}
