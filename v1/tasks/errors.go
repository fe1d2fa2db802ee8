package tasks

import (
	"errors"
	"fmt"
	"time"
)

// Errors of task validation and invocation. The texts of the ones machinery
// has are machinery's.
var (
	// ErrTaskMustBeFunc is returned when a registered task is not a function.
	ErrTaskMustBeFunc = errors.New("Task must be a func type")
	// ErrTaskReturnsNoValue is returned when a task function returns nothing.
	ErrTaskReturnsNoValue = errors.New("Task must return at least a single value")
	// ErrLastReturnValueMustBeError is returned when a task function's last
	// return value is not an error.
	ErrLastReturnValueMustBeError = errors.New("Last return value of a task must be error")
	// ErrTaskPanicked is the error of a task that panicked with a value that
	// is neither an error nor a string.
	ErrTaskPanicked = errors.New("Invoking task caused a panic")

	// ErrNilSignature is returned for a nil signature.
	ErrNilSignature = errors.New("tasks: signature is nil")
	// ErrAggregationMember is returned for a signature with an
	// AggregationKey that has callbacks or is part of a chain, group or
	// chord: a member never runs by itself, only as part of the task its
	// aggregator builds, so its callbacks would never run.
	ErrAggregationMember = errors.New("tasks: an aggregation member runs only in its aggregate: it cannot have callbacks or be part of a chain, group or chord (give them to the aggregate)")
	// ErrUniqueInWorkflow is returned for a signature with UniqueFor that
	// is a callback, a member of a group or chord, or an aggregation
	// member: only a task sent by itself (or the first of a chain, or the
	// one first node of a Workflow) can be unique.
	ErrUniqueInWorkflow = errors.New("tasks: only a task sent by itself (or a chain's first) can be unique: not a callback, a group or chord member, an aggregation member or an aggregate")
	// ErrTaskCancelled is wrapped by the error of waiting on a task that
	// was cancelled (its FAILURE state's error starts with
	// CancelledMessage; see machinery's Server.CancelTask).
	ErrTaskCancelled = errors.New("tasks: task cancelled")
	// ErrBadLimit is wrapped by the error of a signature whose Limit
	// cannot be applied: no key, a negative number, neither a concurrency
	// nor a rate, or a rate without a period.
	ErrBadLimit = errors.New("tasks: bad limit")
	// ErrBadFairKey is wrapped by the error of a signature whose FairKey
	// is longer than MaxFairKeySize.
	ErrBadFairKey = errors.New("tasks: bad fair key")
	// ErrNotUnique is wrapped by the error of a send refused because a task
	// with the same unique key holds it (see Signature.UniqueFor); errors.As
	// finds the *NotUniqueError with the holder's UUID.
	ErrNotUnique = errors.New("tasks: a task with the same unique key is queued or running")
	// ErrEmptyTaskName is returned for a signature without a Name.
	ErrEmptyTaskName = errors.New("tasks: signature has no task name")
	// ErrEmptyWorkflow is returned for a chain, group, chord or DAG without
	// tasks.
	ErrEmptyWorkflow = errors.New("tasks: workflow has no tasks")
	// ErrEmptyGroupUUID is returned for a group without a GroupUUID; build
	// groups with NewGroup.
	ErrEmptyGroupUUID = errors.New("tasks: group has no GroupUUID (build it with NewGroup)")
	// ErrArgs is wrapped by every error about arguments that do not fit the
	// task function.
	ErrArgs = errors.New("tasks: arguments do not fit the task function")
	// ErrDecode is wrapped by every error of DecodeSignature: the message is
	// not JSON, has trailing data, or is not a valid signature.
	ErrDecode = errors.New("tasks: cannot decode signature")
	// ErrNotWorkflowNode is returned by WorkflowParents for a task that is
	// not a node of a workflow sent with SendWorkflowWithContext.
	ErrNotWorkflowNode = errors.New("tasks: the task is not a node of a workflow of any shape")
)

// Errors of building a workflow (NewChainOf, NewGroupOf, NewChordOf,
// DAG.Build). Each is wrapped with the key of the place it is about (see
// WorkflowNode.Key). Building also returns ErrEmptyWorkflow for a chain,
// group or DAG without nodes, the errors of each signature's Validate,
// ErrAggregationMember for an aggregation member, and ErrUniqueInWorkflow
// for a unique signature that is not the workflow's one first node.
var (
	// ErrNilNode is returned for a nil *Signature, *Workflow or Node in a
	// workflow.
	ErrNilNode = errors.New("tasks: workflow node is nil")
	// ErrDuplicateNode is returned when a workflow holds the same
	// *Signature or *Workflow twice, or two signatures with the same UUID:
	// each node runs once, so give each place its own (CopySignature, and
	// clear the copy's UUID).
	ErrDuplicateNode = errors.New("tasks: the same node is twice in a workflow")
	// ErrWiredSignature is returned for a signature in a workflow that
	// NewChain, NewGroup or NewChord already wired (OnSuccess,
	// ChordCallback, GroupUUID or GroupTaskCount is set): say what follows
	// it with the workflow instead. OnError callbacks are allowed.
	ErrWiredSignature = errors.New("tasks: signature already has OnSuccess, a ChordCallback or a GroupUUID: express them in the workflow")
	// ErrBadNodeID is returned for a DAG node id that is not 1 to 64 of
	// A-Z, a-z, 0-9, '_', '.' and '-'.
	ErrBadNodeID = errors.New("tasks: bad DAG node id")
	// ErrDuplicateNodeID is returned for two nodes of a DAG with the same
	// id.
	ErrDuplicateNodeID = errors.New("tasks: DAG node id used twice")
	// ErrUnknownDependency is returned for a DAG dependency that names no
	// node of the DAG.
	ErrUnknownDependency = errors.New("tasks: DAG dependency names no node")
	// ErrDuplicateDependency is returned for a DAG node that lists the
	// same dependency twice.
	ErrDuplicateDependency = errors.New("tasks: DAG dependency listed twice")
	// ErrCycle is returned for a DAG whose dependencies go round in a
	// cycle; the error lists the nodes on it.
	ErrCycle = errors.New("tasks: DAG has a cycle (each node listed depends on the next)")
	// ErrWorkflowTooLarge is returned for a workflow with more than
	// MaxWorkflowNodes signatures or MaxWorkflowDeps dependencies, or that
	// nests more than MaxWorkflowDepth deep.
	ErrWorkflowTooLarge = errors.New("tasks: workflow is too large")
)

// Retriable is implemented by errors that ask for the task to run again
// after RetryIn.
type Retriable interface {
	RetryIn() time.Duration
}

// ErrRetryTaskLater is the error a task returns to run again after a delay,
// whatever its RetryCount. The worker recognises it with errors.As, so it
// may be wrapped. Any other error type implementing Retriable works too.
type ErrRetryTaskLater struct {
	name, msg string
	retryIn   time.Duration
}

// NewErrRetryTaskLater returns an ErrRetryTaskLater that retries after retryIn.
func NewErrRetryTaskLater(msg string, retryIn time.Duration) ErrRetryTaskLater {
	return ErrRetryTaskLater{msg: msg, retryIn: retryIn}
}

// RetryIn returns how long to wait before the task runs again.
func (e ErrRetryTaskLater) RetryIn() time.Duration {
	return e.retryIn
}

// Error returns "Task error: <msg> Will retry in: <duration>".
func (e ErrRetryTaskLater) Error() string {
	return fmt.Sprintf("Task error: %s Will retry in: %s", e.msg, e.retryIn)
}

// ErrUnsupportedType is the error for an Arg.Type or result type that is not
// one of the supported ones.
type ErrUnsupportedType struct {
	valueType string
}

// NewErrUnsupportedType returns the error for valueType.
func NewErrUnsupportedType(valueType string) ErrUnsupportedType {
	return ErrUnsupportedType{valueType: valueType}
}

// Error returns "<type> is not one of supported types".
func (e ErrUnsupportedType) Error() string {
	return fmt.Sprintf("%v is not one of supported types", e.valueType)
}

// PanicError is the error of a task that panicked: Task.Call returns it as
// a *PanicError. Value is what the task passed to panic and Stack the
// goroutine's stack where it panicked, for the worker to log.
//
// Its message and Unwrap follow machinery: a panic with an error is that
// error (panic(errors.New("oops")) gives "oops"), a panic with a string s
// is errors.New(s), and a panic with anything else wraps ErrTaskPanicked.
type PanicError struct {
	Value interface{}
	Stack []byte
}

// Error returns the message of the error the panic stands for.
func (e *PanicError) Error() string {
	return e.Unwrap().Error()
}

// Unwrap returns the error the panic stands for: Value itself when it is an
// error, errors.New(Value) when it is a string, and an error wrapping
// ErrTaskPanicked otherwise.
func (e *PanicError) Unwrap() error {
	switch v := e.Value.(type) {
	case error:
		return v
	case string:
		return errors.New(v)
	default:
		return fmt.Errorf("%w: %v", ErrTaskPanicked, v)
	}
}

// NotUniqueError is the error of a send refused because the task Holder,
// sent with the same unique key (Signature.UniqueFor) to the same queue,
// holds it.
type NotUniqueError struct {
	// Queue is the queue the key is scoped to, Key the unique key
	// (UniqueKeyOf).
	Queue, Key string
	// Task is the UUID of the task refused, Holder of the one that holds
	// the key.
	Task, Holder string
}

// Error says which task was refused and which holds its key.
func (e *NotUniqueError) Error() string {
	return fmt.Sprintf("tasks: task %s not sent: task %s holds its unique key %q on queue %q", e.Task, e.Holder, e.Key, e.Queue)
}

// Unwrap returns ErrNotUnique.
func (e *NotUniqueError) Unwrap() error { return ErrNotUnique }

// CancelledMessage starts the error of the FAILURE state of a cancelled
// task.
const CancelledMessage = "machinist: task cancelled"
