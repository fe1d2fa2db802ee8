package rdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// Replies.
//
// Every reply of a script, and every reply of several fields (HMGET,
// BLPOP), is decoded by one of the parse functions below: pure functions
// that check the reply against its contract (the "Returns:" line of the
// script's .lua file) and never panic. A reply of another shape comes
// from a proxy, another version of a script or a bug; acting on a guess
// at what it meant (a task taken but not delivered, a lease thought
// renewed) is worse than failing, so it is an error wrapping
// ErrMalformedReply that names whose reply it was (a *ReplyError).
//
// go-redis gives a reply as nil, int64, string, []interface{} or, inside
// an array, a goredis.Error; over RESP3 also float64, bool and
// map[interface{}]interface{}, which no script returns.

// ErrMalformedReply is wrapped by the error of every reply whose shape is
// not the one its script or command returns.
var ErrMalformedReply = errors.New("rdb: malformed reply")

// ReplyError is a reply of the wrong shape. It wraps ErrMalformedReply
// and, when there is one, Err.
type ReplyError struct {
	// Reply is whose reply it was: a script, by its file's name
	// ("dequeue"), or a command ("HMGET task hash").
	Reply string
	// Reason says what is wrong with it.
	Reason string
	// Err is what caused it, if anything: a Redis error found inside the
	// reply, or the error decoding a field.
	Err error
}

func (e *ReplyError) Error() string {
	msg := "rdb: malformed " + e.Reply + " reply: " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrMalformedReply and Err.
func (e *ReplyError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrMalformedReply}
	}
	return []error{ErrMalformedReply, e.Err}
}

func malformed(reply string, cause error, format string, args ...interface{}) *ReplyError {
	return &ReplyError{Reply: reply, Reason: fmt.Sprintf(format, args...), Err: cause}
}

// wrongType is the error for v, read as what of reply where want was due.
// A Redis error inside the reply is kept as the cause.
func wrongType(reply string, what at, v interface{}, want string) *ReplyError {
	var cause error
	if e, ok := v.(goredis.Error); ok {
		cause = e
	}
	return malformed(reply, cause, "%s is %s, want %s", what, describe(v), want)
}

// describe names v's type, and its value when short, for an error.
func describe(v interface{}) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case goredis.Error:
		return "a Redis error"
	case int64:
		return "integer " + strconv.FormatInt(v, 10)
	case string:
		if len(v) > 32 {
			return fmt.Sprintf("a string of %d bytes", len(v))
		}
		return fmt.Sprintf("string %q", v)
	case []interface{}:
		return fmt.Sprintf("an array of %d", len(v))
	}
	return fmt.Sprintf("a %T", v)
}

// at is what a parser reads: element i of an array reply, which holds
// name, or the reply itself (whole). It is formatted only for an error.
type at struct {
	i    int
	name string
}

// whole is the reply itself.
var whole = at{i: -1}

func elem(i int, name string) at { return at{i, name} }

func (a at) String() string {
	if a.i < 0 {
		return "the reply"
	}
	return fmt.Sprintf("element %d (%s)", a.i, a.name)
}

func asArray(reply string, v interface{}) ([]interface{}, error) {
	arr, ok := v.([]interface{})
	if !ok {
		return nil, wrongType(reply, whole, v, "an array")
	}
	return arr, nil
}

func asInt(reply string, what at, v interface{}) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, wrongType(reply, what, v, "an integer")
	}
	return n, nil
}

func asString(reply string, what at, v interface{}) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", wrongType(reply, what, v, "a string")
	}
	return s, nil
}

// asID reads a task id or a token: a string that is not empty.
func asID(reply string, what at, v interface{}) (string, error) {
	s, ok := v.(string)
	if !ok || s == "" {
		return "", wrongType(reply, what, v, "a string that is not empty")
	}
	return s, nil
}

// asDecimal reads a field Redis stores as text: a decimal integer of at
// least least.
func asDecimal(reply string, what at, v interface{}, least int64) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, wrongType(reply, what, v, "a decimal string")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < least {
		return 0, malformed(reply, nil, "%s is %s, want a decimal integer of at least %d", what, describe(v), least)
	}
	return n, nil
}

// asIDs reads arr, every element a task id, as strings.
func asIDs(reply string, arr []interface{}, offset int) ([]string, error) {
	var ids []string
	for i, v := range arr {
		id, err := asID(reply, elem(offset+i, "task id"), v)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// parseEnqueueReplies splits enqueue.lua's reply into its n elements, one
// per publish (parseEnqueueReply).
func parseEnqueueReplies(v interface{}, n int) ([]interface{}, error) {
	replies, err := asArray("enqueue", v)
	if err == nil && len(replies) != n {
		err = malformed("enqueue", nil, "%d replies for %d publishes", len(replies), n)
	}
	return replies, err
}

// parseEnqueueReply decodes one publish's element of enqueue.lua's reply:
// {0} when every task was published, {1, id} when a task with that id is
// held already, {4, id} when that task is a member no worker alive
// aggregates, {5, id, holder} when that task is unique and the task holder
// holds its key, {6, id, holder} when that task replaced the holder's
// message and ETA (it debounces). It returns the status and, with 1, 4, 5
// or 6, the id, and with 5 or 6 the holder; with 7 (statusCancelled) the
// cancellation's reason in holder.
func parseEnqueueReply(v interface{}) (code int64, id, holder string, err error) {
	const reply = "enqueue"
	arr, err := asArray(reply, v)
	if err != nil {
		return 0, "", "", err
	}
	if len(arr) == 0 {
		return 0, "", "", malformed(reply, nil, "an empty array, want {0}, {1, id}, {4, id} or {5, id, holder}")
	}
	if code, err = asInt(reply, elem(0, "status"), arr[0]); err != nil {
		return 0, "", "", err
	}
	switch {
	case code == statusOK && len(arr) == 1:
		return code, "", "", nil
	case (code == statusDuplicate || code == statusNoAggregator) && len(arr) == 2:
		if id, err = asID(reply, elem(1, "task id"), arr[1]); err != nil {
			return 0, "", "", err
		}
		return code, id, "", nil
	case (code == statusNotUnique || code == statusReplaced) && len(arr) == 3:
		if id, err = asID(reply, elem(1, "task id"), arr[1]); err != nil {
			return 0, "", "", err
		}
		if holder, err = asID(reply, elem(2, "holder id"), arr[2]); err != nil {
			return 0, "", "", err
		}
		return code, id, holder, nil
	case code == statusCancelled && len(arr) == 3:
		if id, err = asID(reply, elem(1, "task id"), arr[1]); err != nil {
			return 0, "", "", err
		}
		reason, ok := arr[2].(string)
		if !ok {
			return 0, "", "", malformed(reply, nil, "element 2 (reason) is %T %v, want a string", arr[2], arr[2])
		}
		return code, id, reason, nil
	}
	return 0, "", "", malformed(reply, nil, "status %d in an array of %d, want {0}, {1, id}, {4, id}, {5, id, holder}, {6, id, holder} or {7, id, reason}", code, len(arr))
}

// dequeued is a task a dequeue reply delivers.
type dequeued struct {
	id, msg            string
	retried, recovered int
	token              string
	outcome            string // what an earlier holder committed, "" for none
}

// dequeueStride is how many elements of dequeue.lua's reply each task has.
const dequeueStride = 6

// parseDequeueReply decodes dequeue.lua's reply to a call for at most n
// tasks: {expiry_ms} when none was taken, else {expiry_ms, then for each
// task: id, msg, retried, recovered, token, outcome}, with id and token not
// empty, retried and recovered decimal strings of at least 0, and outcome
// "" for none. The tasks come in the reply's order; none is nil.
//
// Tasks of a malformed reply were taken under leases no caller will hold:
// they come back when the leases end (recover.lua).
func parseDequeueReply(v interface{}, n int) ([]dequeued, error) {
	const reply = "dequeue"
	arr, err := asArray(reply, v)
	if err != nil {
		return nil, err
	}
	return parseTaken(reply, arr, 0, n)
}

// parseTaken decodes arr[from:], the part of reply that is a dequeue
// reply (see parseDequeueReply) to a call for at most n tasks; errors
// name elements by their place in the whole reply.
func parseTaken(reply string, arr []interface{}, from, n int) ([]dequeued, error) {
	rest := len(arr) - from
	if rest < 1 || (rest-1)%dequeueStride != 0 {
		return nil, malformed(reply, nil, "an array of %d, want %d + %d per task", len(arr), from+1, dequeueStride)
	}
	if _, err := asInt(reply, elem(from, "lease expiry"), arr[from]); err != nil {
		return nil, err
	}
	count := (rest - 1) / dequeueStride
	if count > max(n, 0) {
		return nil, malformed(reply, nil, "%d tasks, more than the %d asked for", count, n)
	}
	var out []dequeued
	for i := from + 1; i < len(arr); i += dequeueStride {
		var d dequeued
		var retried, recovered int64
		var err error
		if d.id, err = asID(reply, elem(i, "task id"), arr[i]); err != nil {
			return nil, err
		}
		if d.msg, err = asString(reply, elem(i+1, "message"), arr[i+1]); err != nil {
			return nil, err
		}
		if retried, err = asDecimal(reply, elem(i+2, "retried"), arr[i+2], 0); err != nil {
			return nil, err
		}
		if recovered, err = asDecimal(reply, elem(i+3, "recovered"), arr[i+3], 0); err != nil {
			return nil, err
		}
		if d.token, err = asID(reply, elem(i+4, "fencing token"), arr[i+4]); err != nil {
			return nil, err
		}
		if d.outcome, err = asString(reply, elem(i+5, "outcome"), arr[i+5]); err != nil {
			return nil, err
		}
		d.retried, d.recovered = clampInt(retried), clampInt(recovered)
		out = append(out, d)
	}
	return out, nil
}

// clampInt converts n, at least 0, to an int, saturating where int is 32
// bits.
func clampInt(n int64) int {
	return int(min(n, int64(^uint(0)>>1)))
}

// parseExtendReply decodes extend.lua's reply: {expiry_ms, lost ids...},
// the ids whose lease the caller no longer holds. None is nil.
func parseExtendReply(v interface{}) (lost []string, err error) {
	const reply = "extend"
	arr, err := asArray(reply, v)
	if err != nil {
		return nil, err
	}
	if len(arr) == 0 {
		return nil, malformed(reply, nil, "an empty array, want {expiry_ms, lost ids...}")
	}
	if _, err := asInt(reply, elem(0, "lease expiry"), arr[0]); err != nil {
		return nil, err
	}
	return asIDs(reply, arr[1:], 1)
}

// parseCommitReply decodes commit.lua's reply: {0, finished} when the
// caller held the lease (finished: how many members of the group have
// finished, 0 without a group, never negative), {2} when it did not.
func parseCommitReply(v interface{}) (code, finished int64, err error) {
	const reply = "commit"
	arr, err := asArray(reply, v)
	if err != nil {
		return 0, 0, err
	}
	if len(arr) == 0 {
		return 0, 0, malformed(reply, nil, "an empty array, want {0, finished} or {2}")
	}
	if code, err = asInt(reply, elem(0, "status"), arr[0]); err != nil {
		return 0, 0, err
	}
	switch {
	case code == statusOK && len(arr) == 2:
		if finished, err = asInt(reply, elem(1, "members finished"), arr[1]); err != nil {
			return 0, 0, err
		}
		if finished < 0 {
			return 0, 0, malformed(reply, nil, "%d members finished", finished)
		}
		return code, finished, nil
	case code == statusLeaseLost && len(arr) == 1:
		return code, 0, nil
	}
	return 0, 0, malformed(reply, nil, "status %d in an array of %d, want {0, finished} or {2}", code, len(arr))
}

// parseRequeueReply decodes requeue.lua's reply: {lost ids...}, the ids
// whose lease the caller did not hold. None is nil.
func parseRequeueReply(v interface{}) (lost []string, err error) {
	const reply = "requeue"
	arr, err := asArray(reply, v)
	if err != nil {
		return nil, err
	}
	return asIDs(reply, arr, 0)
}

// parseForwardReply decodes forward.lua's reply: {moved, next_ms,
// stranded}, how many tasks moved (at least 0, the members stranded
// included), when the earliest task still waiting is due (-1: none), and
// how many aggregation members were stranded (0 to moved).
func parseForwardReply(v interface{}) (moved, nextIn, stranded int64, err error) {
	const reply = "forward"
	arr, err := asArray(reply, v)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(arr) != 3 {
		return 0, 0, 0, malformed(reply, nil, "an array of %d, want {moved, next_ms, stranded}", len(arr))
	}
	if moved, err = asInt(reply, elem(0, "tasks moved"), arr[0]); err != nil {
		return 0, 0, 0, err
	}
	if nextIn, err = asInt(reply, elem(1, "next due"), arr[1]); err != nil {
		return 0, 0, 0, err
	}
	if stranded, err = asInt(reply, elem(2, "members stranded"), arr[2]); err != nil {
		return 0, 0, 0, err
	}
	if moved < 0 || nextIn < -1 || stranded < 0 || stranded > moved {
		return 0, 0, 0, malformed(reply, nil, "{%d, %d, %d}, want tasks moved >= 0, next due >= -1 and 0 <= members stranded <= tasks moved", moved, nextIn, stranded)
	}
	return moved, nextIn, stranded, nil
}

// recoverSeparator parts the recovered ids from the archived ones in
// recover.lua's reply.
const recoverSeparator = "|"

// parseUnrouteReply reads unroute.lua's {moved, more}.
func parseUnrouteReply(v interface{}) (moved int64, more bool, err error) {
	const reply = "unroute"
	arr, err := asArray(reply, v)
	if err != nil {
		return 0, false, err
	}
	if len(arr) != 2 {
		return 0, false, malformed(reply, nil, "an array of %d, want {moved, more}", len(arr))
	}
	if moved, err = asInt(reply, elem(0, "tasks moved"), arr[0]); err != nil {
		return 0, false, err
	}
	flag, err := asInt(reply, elem(1, "more"), arr[1])
	if err != nil {
		return 0, false, err
	}
	if moved < 0 || flag < 0 || flag > 1 {
		return 0, false, malformed(reply, nil, "{%d, %d}, want tasks moved >= 0 and more 0 or 1", moved, flag)
	}
	return moved, flag == 1, nil
}

// parseRecoverReply decodes recover.lua's reply: {recovered ids..., "|",
// archived ids...}, exactly one "|". None recovered (archived) is nil.
func parseRecoverReply(v interface{}) (recovered, archived []string, err error) {
	const reply = "recover"
	arr, err := asArray(reply, v)
	if err != nil {
		return nil, nil, err
	}
	sep := -1
	for i, v := range arr {
		if s, ok := v.(string); ok && s == recoverSeparator {
			if sep >= 0 {
				return nil, nil, malformed(reply, nil, "a second %q at element %d (the first at %d)", recoverSeparator, i, sep)
			}
			sep = i
		}
	}
	if sep < 0 {
		return nil, nil, malformed(reply, nil, "no %q in an array of %d", recoverSeparator, len(arr))
	}
	if recovered, err = asIDs(reply, arr[:sep], 0); err != nil {
		return nil, nil, err
	}
	if archived, err = asIDs(reply, arr[sep+1:], sep+1); err != nil {
		return nil, nil, err
	}
	return recovered, archived, nil
}

// parseElectReply decodes elect.lua's reply: 1 when the holder is the
// maintainer, 0 when another is.
func parseElectReply(v interface{}) (bool, error) {
	won, err := parseStatusReply("elect", v, 0, 1)
	return won == 1, err
}

// parseSettleTakeReply decodes the reply of a settle script asked to take
// the next task (ack.lua, ack_success.lua): 2 when the caller does not
// hold the lease, 8 when a chord member's success completed its group
// and it was not settled (ack_success.lua), 0 when a run again found its first run settled the task
// (took is false: what that run took is the caller's to put back), or {0,
// expiry_ms, then the task taken, if one was, as dequeue.lua gives it}.
func parseSettleTakeReply(script string, v interface{}) (code int64, taken []dequeued, took bool, err error) {
	arr, ok := v.([]interface{})
	if !ok {
		code, err = parseStatusReply(script, v, statusOK, statusLeaseLost, statusChordDue)
		return code, nil, false, err
	}
	if len(arr) == 0 {
		return 0, nil, false, malformed(script, nil, "an array of 0, want 2 + %d per task", dequeueStride)
	}
	if code, err := asInt(script, elem(0, "status"), arr[0]); err != nil {
		return 0, nil, false, err
	} else if code != statusOK {
		return 0, nil, false, malformed(script, nil, "status %d in an array, want 0", code)
	}
	if taken, err = parseTaken(script, arr, 1, 1); err != nil {
		return 0, nil, false, err
	}
	return statusOK, taken, true, nil
}

// parseStatusReply decodes the reply of script, a status code: an integer,
// one of codes (ack: 0 or 2; ack_success: 0, 2 or 8; trigger_chord: 0, 1
// or 2).
func parseStatusReply(script string, v interface{}, codes ...int64) (int64, error) {
	code, err := asInt(script, whole, v)
	if err != nil {
		return 0, err
	}
	if !slices.Contains(codes, code) {
		return 0, malformed(script, nil, "status %d, want one of %v", code, codes)
	}
	return code, nil
}

// parseCountReply decodes the reply of script, a count: an integer of at
// least 0 (requeue_archived, delete_archived, group_done).
func parseCountReply(script string, v interface{}) (int64, error) {
	n, err := asInt(script, whole, v)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, malformed(script, nil, "a count of %d", n)
	}
	return n, nil
}

// parseBlpopReply decodes the reply of BLPOP keys... timeout that took a
// token: {key, token}, key one of keys. It returns the key.
func parseBlpopReply(v interface{}, keys []string) (string, error) {
	const reply = "BLPOP"
	arr, err := asArray(reply, v)
	if err != nil {
		return "", err
	}
	if len(arr) != 2 {
		return "", malformed(reply, nil, "an array of %d, want {key, value}", len(arr))
	}
	key, err := asString(reply, elem(0, "key"), arr[0])
	if err != nil {
		return "", err
	}
	if _, err := asString(reply, elem(1, "value"), arr[1]); err != nil {
		return "", err
	}
	if !slices.Contains(keys, key) {
		return "", malformed(reply, nil, "key %q is none of the %d keys waited on", key, len(keys))
	}
	return key, nil
}

// taskInfoFields are the fields of a task hash that taskInfos reads, in
// the order parseTaskFields takes them.
var taskInfoFields = []string{"msg", "retried", "recovered", "error", "failed_at", "process_at", "state", "lease_exp"}

// taskFields are the fields of a task hash that taskInfos reads.
type taskFields struct {
	msg                string // "" when the hash is gone
	retried, recovered int
	lastError          string
	hasError           bool  // the hash has an error field, lastError
	failedAt           int64 // ms since the epoch; 0 for none
	processAt          int64 // ms since the epoch; 0 for none
	state              string
	leaseExp           int64 // ms since the epoch; 0 for none
}

// parseTaskFields decodes the reply of HMGET of a task hash with
// taskInfoFields: eight elements, each a string or nil (no such field);
// retried, recovered, failed_at, process_at and lease_exp decimal strings
// of at least 0.
func parseTaskFields(vals []interface{}) (taskFields, error) {
	const reply = "HMGET task hash"
	var f taskFields
	if len(vals) != len(taskInfoFields) {
		return f, malformed(reply, nil, "an array of %d, want %d fields", len(vals), len(taskInfoFields))
	}
	field := func(i int) (string, bool, error) {
		if vals[i] == nil {
			return "", false, nil
		}
		s, err := asString(reply, elem(i, taskInfoFields[i]), vals[i])
		return s, err == nil, err
	}
	decimal := func(i int, least int64) (int64, error) {
		if vals[i] == nil {
			return 0, nil
		}
		return asDecimal(reply, elem(i, taskInfoFields[i]), vals[i], least)
	}
	var err error
	var retried, recovered int64
	if f.msg, _, err = field(0); err != nil {
		return taskFields{}, err
	}
	if retried, err = decimal(1, 0); err != nil {
		return taskFields{}, err
	}
	if recovered, err = decimal(2, 0); err != nil {
		return taskFields{}, err
	}
	if f.lastError, f.hasError, err = field(3); err != nil {
		return taskFields{}, err
	}
	if f.failedAt, err = decimal(4, 0); err != nil {
		return taskFields{}, err
	}
	if f.processAt, err = decimal(5, 0); err != nil {
		return taskFields{}, err
	}
	if f.state, _, err = field(6); err != nil {
		return taskFields{}, err
	}
	if f.leaseExp, err = decimal(7, 0); err != nil {
		return taskFields{}, err
	}
	f.retried, f.recovered = clampInt(retried), clampInt(recovered)
	return f, nil
}

// parseGroupMeta decodes the reply of HMGET of a group hash with uuids and
// count: {uuids, count}, each a string or nil. A nil count means the group
// has no bookkeeping (found is false); uuids is nil when InitGroup was not
// called, else a JSON array of the members' UUIDs, returned in its order.
func parseGroupMeta(vals []interface{}) (members []string, found bool, err error) {
	const reply = "HMGET group hash"
	if len(vals) != 2 {
		return nil, false, malformed(reply, nil, "an array of %d, want {uuids, count}", len(vals))
	}
	if vals[1] == nil {
		return nil, false, nil
	}
	if _, err := asString(reply, elem(1, "count"), vals[1]); err != nil {
		return nil, false, err
	}
	if vals[0] == nil {
		return nil, true, nil
	}
	raw, err := asString(reply, elem(0, "uuids"), vals[0])
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal([]byte(raw), &members); err != nil {
		return nil, false, malformed(reply, err, "%s is not a JSON array of strings", elem(0, "uuids"))
	}
	return members, true, nil
}

// claimedBatch is a batch claim_batch.lua took.
type claimedBatch struct {
	id, name, key, token string
	failed, recovered    int
	handed               string // the aggregate handed over (hand_batch.lua), or ""
	members              []claimedMember
}

// claimedMember is a member of a claimedBatch; msg is "" when its hash is
// gone.
type claimedMember struct{ id, msg string }

// claimBatchHead is how many elements of claim_batch.lua's reply come
// before the members.
const claimBatchHead = 8

// parseClaimBatchReply decodes claim_batch.lua's reply: {} when nothing
// was due (nil), else {id, name, key, token, lease_exp, failed, recovered,
// handed, then for each member: id, msg}, with id, name, key, token and member ids
// not empty, lease_exp, failed and recovered integers (failed and
// recovered at least 0), and at least one member.
//
// A batch of a malformed reply was taken under a lease no caller holds:
// it is taken again when the lease ends.
func parseClaimBatchReply(v interface{}) (*claimedBatch, error) {
	const reply = "claim_batch"
	arr, err := asArray(reply, v)
	if err != nil {
		return nil, err
	}
	if len(arr) == 0 {
		return nil, nil
	}
	if len(arr) < claimBatchHead+2 || (len(arr)-claimBatchHead)%2 != 0 {
		return nil, malformed(reply, nil, "an array of %d, want %d + 2 per member, at least one", len(arr), claimBatchHead)
	}
	var c claimedBatch
	for i, f := range []struct {
		name string
		dst  *string
	}{{"batch id", &c.id}, {"task name", &c.name}, {"aggregation key", &c.key}, {"fencing token", &c.token}} {
		if *f.dst, err = asID(reply, elem(i, f.name), arr[i]); err != nil {
			return nil, err
		}
	}
	if _, err := asInt(reply, elem(4, "lease expiry"), arr[4]); err != nil {
		return nil, err
	}
	failed, err := asInt(reply, elem(5, "failed"), arr[5])
	if err != nil {
		return nil, err
	}
	recovered, err := asInt(reply, elem(6, "recovered"), arr[6])
	if err != nil {
		return nil, err
	}
	if failed < 0 || recovered < 0 {
		return nil, malformed(reply, nil, "failed %d, recovered %d, want counts of at least 0", failed, recovered)
	}
	c.failed, c.recovered = clampInt(failed), clampInt(recovered)
	if c.handed, err = asString(reply, elem(7, "handed aggregate"), arr[7]); err != nil {
		return nil, err
	}
	for i := claimBatchHead; i < len(arr); i += 2 {
		var m claimedMember
		if m.id, err = asID(reply, elem(i, "task id"), arr[i]); err != nil {
			return nil, err
		}
		if m.msg, err = asString(reply, elem(i+1, "message"), arr[i+1]); err != nil {
			return nil, err
		}
		c.members = append(c.members, m)
	}
	return &c, nil
}

// parseTakeWaitingReply decodes take_waiting.lua's reply: {0, msg} done,
// {1} no such task, {2, state} the task does not wait. It returns the code
// and the message or state.
func parseTakeWaitingReply(v interface{}) (code int64, val string, err error) {
	const reply = "take_waiting"
	arr, err := asArray(reply, v)
	if err != nil {
		return 0, "", err
	}
	if len(arr) == 0 {
		return 0, "", malformed(reply, nil, "an empty array, want {0, msg}, {1} or {2, state}")
	}
	if code, err = asInt(reply, elem(0, "status"), arr[0]); err != nil {
		return 0, "", err
	}
	switch {
	case code == 1 && len(arr) == 1:
		return code, "", nil
	case (code == 0 || code == 2) && len(arr) == 2:
		s, ok := arr[1].(string)
		if !ok || s == "" {
			return 0, "", malformed(reply, nil, "element 1 is %T %v, want a non-empty string", arr[1], arr[1])
		}
		return code, s, nil
	}
	return 0, "", malformed(reply, nil, "status %d in an array of %d, want {0, msg}, {1} or {2, state}", code, len(arr))
}

// parseCancelReply decodes cancel.lua's reply: {0, msg} or {3, msg} done,
// {1} no such task, {2, state} it cannot be cancelled.
func parseCancelReply(v interface{}) (code int64, val string, err error) {
	const reply = "cancel"
	arr, err := asArray(reply, v)
	if err != nil {
		return 0, "", err
	}
	if len(arr) == 0 {
		return 0, "", malformed(reply, nil, "an empty array, want {0, msg}, {1}, {2, state}, {3, msg} or {4}")
	}
	if code, err = asInt(reply, elem(0, "status"), arr[0]); err != nil {
		return 0, "", err
	}
	switch {
	case (code == 1 || code == 4) && len(arr) == 1:
		return code, "", nil
	case (code == 0 || code == 2 || code == 3) && len(arr) == 2:
		s, ok := arr[1].(string)
		if !ok || s == "" {
			return 0, "", malformed(reply, nil, "element 1 is %T %v, want a non-empty string", arr[1], arr[1])
		}
		return code, s, nil
	}
	return 0, "", malformed(reply, nil, "status %d in an array of %d, want {0, msg}, {1}, {2, state}, {3, msg} or {4}", code, len(arr))
}
