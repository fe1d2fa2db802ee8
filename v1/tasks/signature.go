package tasks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Arg is one argument of a task: Type is one of the 29 supported type
// strings (see ReflectValue) and Value is the value, which after a JSON round
// trip is a json.Number for numbers, a string for strings and []byte (base64
// on the wire), and a []interface{} for slices.
type Arg struct {
	Name  string      `bson:"name"`
	Type  string      `bson:"type"`
	Value interface{} `bson:"value"`
}

// Headers carries metadata alongside a signature, such as the trace context.
type Headers map[string]interface{}

// WorkflowParent names a parent of a workflow node: its key in the
// workflow and its task's UUID.
type WorkflowParent struct {
	Key  string
	UUID string
}

// DeadlineHeader is the header that carries a task's deadline, as RFC 3339
// with nanoseconds: the task's context ends then (or at its Timeout,
// whichever comes first), and a task that starts after it, or fails after
// it, fails for good, without retries. SendWorkflowWithContext sets it on
// every node of a workflow with a Deadline; any task can carry it.
const DeadlineHeader = "machinist_deadline"

// SetDeadline sets the task's deadline (DeadlineHeader).
func (s *Signature) SetDeadline(at time.Time) {
	if s.Headers == nil {
		s.Headers = Headers{}
	}
	s.Headers[DeadlineHeader] = at.UTC().Format(time.RFC3339Nano)
}

// Deadline returns the task's deadline (DeadlineHeader), and whether it
// has one that parses.
func (s *Signature) Deadline() (time.Time, bool) {
	v, _ := s.Headers[DeadlineHeader].(string)
	if v == "" {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	return at, err == nil
}

// Set stores a string value under key.
func (h Headers) Set(key, val string) {
	h[key] = val
}

// Get returns the string stored under key, or "" when there is none.
func (h Headers) Get(key string) string {
	s, _ := h[key].(string)
	return s
}

// ForeachKey calls handler for every key whose value is a string, stopping at
// the first error, which it returns.
func (h Headers) ForeachKey(handler func(key, val string) error) error {
	for k, v := range h {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if err := handler(k, s); err != nil {
			return err
		}
	}
	return nil
}

// Signature describes one task invocation: which registered function to run,
// with which arguments, where, when, and what to do after it. Its JSON has
// the Go field names as keys: json.Marshal writes machinery's fields always,
// as machinery does, and machinist's own fields only when they are set, so a
// signature that uses none of them has machinery's JSON. The store keeps the
// smaller form of EncodeSignature, which leaves out every empty field;
// DecodeSignature reads both.
type Signature struct {
	UUID           string
	Name           string
	RoutingKey     string // the queue; empty means the config's DefaultQueue
	ETA            *time.Time
	GroupUUID      string
	GroupTaskCount int
	Args           []Arg
	Headers        Headers
	Priority       uint8 // within its queue, a task of a higher Priority is taken first; 0 to MaxPriority (above counts as MaxPriority)
	Immutable      bool  // when true, the results of the previous chain member are not appended to Args
	RetryCount     int   // how many more times a failing task is retried
	RetryTimeout   int   // before each retry, becomes the first Fibonacci number above it, and the retry waits that many seconds (from 1: 2 s, then 3 s)
	OnSuccess      []*Signature
	OnError        []*Signature
	ChordCallback  *Signature

	BrokerMessageGroupId        string // accepted for compatibility (SQS FIFO); unused
	SQSReceiptHandle            string // accepted for compatibility (SQS); unused
	StopTaskDeletionOnError     bool   // accepted for compatibility; a failed task is always archived
	IgnoreWhenTaskNotRegistered bool   // drop the task, instead of returning it for other workers, when its name is not registered

	// Timeout bounds one run of the task: its context carries a deadline this
	// far after the start. Zero means no deadline. machinist extension;
	// machinery ignores the field.
	Timeout time.Duration `json:",omitempty"`

	// AggregationKey makes the task a member of an aggregation group: the
	// broker holds it with the other tasks of its name and key in its queue
	// until the group is due, and a worker that aggregates the name runs
	// one task built from them all instead (see brokers/iface.Aggregator).
	// machinist extension.
	AggregationKey string `json:",omitempty"`

	// UniqueFor makes the task unique for up to this long: while a task
	// sent with the same unique key to the same queue holds the key, a send
	// fails with an error wrapping ErrNotUnique (a *NotUniqueError naming
	// the holder's UUID). The holder keeps the key until it finishes (its
	// success, or its failure for good) or UniqueFor has passed, whichever
	// comes first, so a key never outlives UniqueFor, even if its worker
	// died. Zero: not unique. machinist extension.
	UniqueFor time.Duration `json:",omitempty"`
	// UniqueKey is the unique key of a task with UniqueFor; empty, the task
	// name and args (see UniqueKeyOf). machinist extension.
	UniqueKey string `json:",omitempty"`
	// UniqueReplace debounces: when the task holding the key has not
	// started (it is pending or scheduled), the send replaces its
	// signature (all but its UUID: args, headers, ETA, callbacks …) with
	// this one, gives the key UniqueFor again, and succeeds; the signature's UUID becomes the holder's, so
	// its result is the holder's. A holder that has started (running, or
	// waiting for a retry) refuses it as without UniqueReplace. machinist
	// extension.
	UniqueReplace bool `json:",omitempty"`

	// WorkflowUUID names the chain ("chain_…"), group or chord (its
	// group's GroupUUID) the task was sent in; SendChain, SendGroup and
	// SendChord set it on every task of the workflow, their OnSuccess
	// callbacks and a chord's callback included; it travels with the task
	// (omitted when empty: machinery ignores it) and each of its states
	// names it (TaskState.Workflow), so that the workflow can be found,
	// and cancelled as a whole, from any of its tasks. machinist extension.
	WorkflowUUID string `json:",omitempty"`
	// WorkflowNode is the key of the task's node in its workflow's graph
	// (WorkflowNode.Key), on the signatures of a workflow built by
	// NewChainOf, NewGroupOf, NewChordOf or DAG.Build: the store releases
	// the nodes that follow it when it succeeds. machinist extension.
	WorkflowNode string `json:",omitempty"`
	// WorkflowParents are the nodes a workflow node runs after, in the
	// order of its deps (WorkflowNode.Deps), set when the workflow is
	// built: WorkflowParents(ctx) reads their states, and a traced run
	// links to the spans that ran them. machinist extension.
	WorkflowParents []WorkflowParent `json:",omitempty"`

	// Limit puts the task under a per-key limit: how many of the tasks of
	// its key run at once in its queue, and how many start per period.
	// A task over the limit is not taken by a worker: it waits for a slot
	// (see Limit). machinist extension.
	Limit *Limit `json:",omitempty"`

	// FairKey shares the queue fairly between keys (a tenant, a
	// customer): among the tasks waiting at one Priority, workers take the
	// keys that have tasks in turn, one task each, so that one key's
	// backlog does not hold up the others; the tasks of a key, and those
	// without one (which take their turns as one more key), run in the
	// order they were sent. At most MaxFairKeySize bytes. machinist
	// extension.
	FairKey string `json:",omitempty"`
}

// MaxPriority is the highest Priority a queue tells apart: a task sent
// with a higher one waits with those of MaxPriority, as RabbitMQ treats a
// priority above its queue's maximum.
const MaxPriority = 9

// MaxFairKeySize is the longest FairKey, in bytes.
const MaxFairKeySize = 256

// storedSignature is a Signature as EncodeSignature writes it: machinery's
// fields too are left out when empty, here and in the callbacks, so that a
// pending task costs the store only the fields it sets. machinist's own
// fields come from the embedded signature, whose machinery fields these
// hide; so a field added to Signature is stored without a change here.
type storedSignature struct {
	UUID           string             `json:",omitempty"`
	Name           string             `json:",omitempty"`
	RoutingKey     string             `json:",omitempty"`
	ETA            *time.Time         `json:",omitempty"`
	GroupUUID      string             `json:",omitempty"`
	GroupTaskCount int                `json:",omitempty"`
	Args           []Arg              `json:",omitempty"`
	Headers        Headers            `json:",omitempty"`
	Priority       uint8              `json:",omitempty"`
	Immutable      bool               `json:",omitempty"`
	RetryCount     int                `json:",omitempty"`
	RetryTimeout   int                `json:",omitempty"`
	OnSuccess      []*storedSignature `json:",omitempty"`
	OnError        []*storedSignature `json:",omitempty"`
	ChordCallback  *storedSignature   `json:",omitempty"`

	BrokerMessageGroupId        string `json:",omitempty"`
	SQSReceiptHandle            string `json:",omitempty"`
	StopTaskDeletionOnError     bool   `json:",omitempty"`
	IgnoreWhenTaskNotRegistered bool   `json:",omitempty"`

	*extensions
}

// extensions is a Signature seen only for machinist's own fields.
type extensions Signature

// encodeStored encodes sig as a storedSignature.
func encodeStored(sig *Signature) ([]byte, error) {
	w, err := stored(sig, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// stored returns the storedSignature of s, at depth in its workflow: deeper
// than 1000 is refused, as Validate refuses it, so that a cycle of callbacks
// ends in an error.
func stored(s *Signature, depth int) (*storedSignature, error) {
	if s == nil {
		return nil, nil
	}
	if depth > 1000 {
		return nil, fmt.Errorf("tasks: callbacks of signature %q nest deeper than 1000 (a cycle?)", s.Name)
	}
	w := &storedSignature{
		UUID:                        s.UUID,
		Name:                        s.Name,
		RoutingKey:                  s.RoutingKey,
		ETA:                         s.ETA,
		GroupUUID:                   s.GroupUUID,
		GroupTaskCount:              s.GroupTaskCount,
		Args:                        s.Args,
		Headers:                     s.Headers,
		Priority:                    s.Priority,
		Immutable:                   s.Immutable,
		RetryCount:                  s.RetryCount,
		RetryTimeout:                s.RetryTimeout,
		BrokerMessageGroupId:        s.BrokerMessageGroupId,
		SQSReceiptHandle:            s.SQSReceiptHandle,
		StopTaskDeletionOnError:     s.StopTaskDeletionOnError,
		IgnoreWhenTaskNotRegistered: s.IgnoreWhenTaskNotRegistered,
		extensions:                  (*extensions)(s),
	}
	var err error
	if w.OnSuccess, err = storedList(s.OnSuccess, depth+1); err != nil {
		return nil, err
	}
	if w.OnError, err = storedList(s.OnError, depth+1); err != nil {
		return nil, err
	}
	if w.ChordCallback, err = stored(s.ChordCallback, depth+1); err != nil {
		return nil, err
	}
	return w, nil
}

func storedList(sigs []*Signature, depth int) ([]*storedSignature, error) {
	if len(sigs) == 0 {
		return nil, nil
	}
	out := make([]*storedSignature, len(sigs))
	for i, s := range sigs {
		w, err := stored(s, depth)
		if err != nil {
			return nil, err
		}
		out[i] = w
	}
	return out, nil
}

// Limit is a per-key limit (Signature.Limit), shared by the tasks of its
// Key in one queue, across every worker: at most Concurrency of them run
// at once (0: no bound), and at most Rate start per Per (0: no bound),
// evenly spaced: one every Per / Rate, without bursts (give or take the
// delay of forwarding a scheduled task when it is due). A running task holds its slot while its lease
// lives, so the slot of a task whose worker died comes back with its
// lease. A task over the concurrency waits, parked, until a task of its
// key stops running; one over the rate is scheduled for the start it
// books. Neither is a failure or a retry. The tasks of a key should agree
// on its numbers: each is checked against its own.
type Limit struct {
	Key         string        `json:",omitempty"`
	Concurrency int           `json:",omitempty"`
	Rate        int           `json:",omitempty"`
	Per         time.Duration `json:",omitempty"`
}

// Validate reports what makes l unusable, wrapping ErrBadLimit.
func (l *Limit) Validate() error {
	switch {
	case l.Key == "":
		return fmt.Errorf("%w: no Key", ErrBadLimit)
	case l.Concurrency < 0:
		return fmt.Errorf("%w (key %q): Concurrency %d is negative", ErrBadLimit, l.Key, l.Concurrency)
	case l.Rate < 0:
		return fmt.Errorf("%w (key %q): Rate %d is negative", ErrBadLimit, l.Key, l.Rate)
	case l.Concurrency == 0 && l.Rate == 0:
		return fmt.Errorf("%w (key %q): neither Concurrency nor Rate is set", ErrBadLimit, l.Key)
	case l.Rate > 0 && l.Per < time.Millisecond:
		return fmt.Errorf("%w (key %q): Rate %d needs a Per of a millisecond or more, not %v", ErrBadLimit, l.Key, l.Rate, l.Per)
	case l.Rate == 0 && l.Per != 0:
		return fmt.Errorf("%w (key %q): Per %v without a Rate", ErrBadLimit, l.Key, l.Per)
	}
	return nil
}

// UniqueKeyOf returns the unique key of sig: its UniqueKey or, when empty,
// its name and a digest of its args (the queue is the key's scope).
func UniqueKeyOf(sig *Signature) string {
	if sig.UniqueKey != "" {
		return sig.UniqueKey
	}
	args, _ := json.Marshal(sig.Args) // args that cannot be encoded cannot be sent either
	sum := sha256.Sum256(args)
	return sig.Name + ":" + hex.EncodeToString(sum[:16])
}

// NewSignature returns a signature for the task name with args and a fresh
// "task_" UUID.
func NewSignature(name string, args []Arg) (*Signature, error) {
	if name == "" {
		return nil, ErrEmptyTaskName
	}
	return &Signature{
		UUID: "task_" + uuid.NewString(),
		Name: name,
		Args: args,
	}, nil
}

// Validate reports what makes the signature impossible to send: nil, or
// without a name, itself or one of its callbacks.
func (s *Signature) Validate() error {
	return s.validate(0)
}

func (s *Signature) validate(depth int) error {
	if s == nil {
		return ErrNilSignature
	}
	if s.Name == "" {
		return fmt.Errorf("%w (UUID %q)", ErrEmptyTaskName, s.UUID)
	}
	if depth > 1000 {
		return fmt.Errorf("tasks: callbacks of signature %q nest deeper than 1000 (a cycle?)", s.Name)
	}
	if s.AggregationKey != "" && (depth > 0 || len(s.OnSuccess) > 0 || len(s.OnError) > 0 || s.ChordCallback != nil || s.GroupUUID != "") {
		return fmt.Errorf("%w (%q, key %q)", ErrAggregationMember, s.Name, s.AggregationKey)
	}
	switch {
	case s.UniqueFor < 0:
		return fmt.Errorf("tasks: signature %q: UniqueFor %v is negative", s.Name, s.UniqueFor)
	case s.UniqueFor == 0 && (s.UniqueKey != "" || s.UniqueReplace):
		return fmt.Errorf("tasks: signature %q has a UniqueKey or UniqueReplace but no UniqueFor (how long it is unique)", s.Name)
	case s.UniqueFor > 0 && s.UniqueFor < time.Millisecond:
		return fmt.Errorf("tasks: signature %q: UniqueFor %v is shorter than a millisecond", s.Name, s.UniqueFor)
	case s.UniqueFor > 0 && (depth > 0 || s.GroupUUID != "" || s.AggregationKey != ""):
		return fmt.Errorf("%w (%q)", ErrUniqueInWorkflow, s.Name)
	}
	if len(s.FairKey) > MaxFairKeySize {
		return fmt.Errorf("%w: signature %q: %d bytes, more than MaxFairKeySize (%d)", ErrBadFairKey, s.Name, len(s.FairKey), MaxFairKeySize)
	}
	if s.AggregationKey != "" && (s.FairKey != "" || s.Priority > 0) {
		return fmt.Errorf("%w (%q): a member cannot have a FairKey or a Priority", ErrAggregationMember, s.Name)
	}
	if s.Limit != nil {
		if s.AggregationKey != "" {
			return fmt.Errorf("%w (%q): a limit applies to the aggregate, not to its members", ErrAggregationMember, s.Name)
		}
		if err := s.Limit.Validate(); err != nil {
			return fmt.Errorf("signature %q: %w", s.Name, err)
		}
	}
	for _, list := range []struct {
		name string
		sigs []*Signature
	}{{"OnSuccess", s.OnSuccess}, {"OnError", s.OnError}} {
		for i, cb := range list.sigs {
			if err := cb.validate(depth + 1); err != nil {
				return fmt.Errorf("%s[%d] of %q: %w", list.name, i, s.Name, err)
			}
		}
	}
	if s.ChordCallback != nil {
		if err := s.ChordCallback.validate(depth + 1); err != nil {
			return fmt.Errorf("ChordCallback of %q: %w", s.Name, err)
		}
	}
	return nil
}

// CopySignatures returns deep copies of signatures.
func CopySignatures(signatures ...*Signature) []*Signature {
	out := make([]*Signature, len(signatures))
	for i, s := range signatures {
		out[i] = CopySignature(s)
	}
	return out
}

// CopySignature returns a deep copy of signature: nested callbacks, args,
// headers and slice values are copied, so the copy can be changed or sent
// while the original is in use.
func CopySignature(signature *Signature) *Signature {
	if signature == nil {
		return nil
	}
	c := *signature
	if signature.ETA != nil {
		eta := *signature.ETA
		c.ETA = &eta
	}
	if signature.Args != nil {
		c.Args = make([]Arg, len(signature.Args))
		for i, a := range signature.Args {
			c.Args[i] = Arg{Name: a.Name, Type: a.Type, Value: copyValue(a.Value)}
		}
	}
	if signature.Headers != nil {
		c.Headers = make(Headers, len(signature.Headers))
		for k, v := range signature.Headers {
			c.Headers[k] = copyValue(v)
		}
	}
	if signature.OnSuccess != nil {
		c.OnSuccess = CopySignatures(signature.OnSuccess...)
	}
	if signature.OnError != nil {
		c.OnError = CopySignatures(signature.OnError...)
	}
	c.ChordCallback = CopySignature(signature.ChordCallback)
	if signature.Limit != nil {
		l := *signature.Limit
		c.Limit = &l
	}
	c.WorkflowParents = slices.Clone(signature.WorkflowParents)
	return &c
}

// copyValue copies slices and maps (recursively) so that a copy shares no
// mutable memory with its original; other values are returned as they are.
func copyValue(v interface{}) interface{} {
	if v == nil {
		return nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice:
		if rv.IsNil() {
			return v
		}
		c := reflect.MakeSlice(rv.Type(), rv.Len(), rv.Len())
		if rv.Type().Elem().Kind() == reflect.Interface {
			for i := 0; i < rv.Len(); i++ {
				if e := rv.Index(i).Interface(); e != nil {
					c.Index(i).Set(reflect.ValueOf(copyValue(e)))
				}
			}
		} else {
			reflect.Copy(c, rv)
		}
		return c.Interface()
	case reflect.Map:
		if rv.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(rv.Type(), rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			val := iter.Value()
			if val.Kind() == reflect.Interface && !val.IsNil() {
				val = reflect.ValueOf(copyValue(val.Interface()))
			}
			c.SetMapIndex(iter.Key(), val)
		}
		return c.Interface()
	default:
		return v
	}
}
