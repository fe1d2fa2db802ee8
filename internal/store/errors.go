package store

import (
	"errors"
	"fmt"

	"github.com/b6192125/machinist/v1/tasks"
)

// Errors of brokers (the tasks half of the store). Implementations wrap
// them with %w, so callers branch with errors.Is.
var (
	// ErrLeaseLost is returned when the caller no longer holds the lease of
	// the task it tries to acknowledge, retry, archive or requeue.
	ErrLeaseLost = errors.New("brokers: lease lost")
	// ErrDuplicateTask is returned by Publish when a task with the same UUID
	// is still queued, scheduled, waiting for a retry or running.
	ErrDuplicateTask = errors.New("brokers: a task with this UUID is already queued")
	// ErrShardKeys is returned for a task sent to a sharded queue
	// (config.RedisConfig.QueueShards) with more than one of an
	// aggregation key, a unique key and a limit: each decides a shard, and
	// they could disagree.
	ErrShardKeys = errors.New("brokers: a task of a sharded queue may have only one of an aggregation key, a unique key and a limit")
	// ErrTaskNotFound is returned when a task named by UUID is not where the
	// caller expects it.
	ErrTaskNotFound = errors.New("brokers: task not found")
	// ErrTaskNotWaiting is wrapped by the error of an operator's action
	// (Inspector.TakeWaiting, Canceller.CancelTask) on a task in a state it
	// does not apply to: for TakeWaiting one that runs, is archived or
	// waits in an aggregation group; for both one that is finishing (its
	// outcome committed) or archived, and for CancelTask a member in a
	// batch being built. The error names the state.
	ErrTaskNotWaiting = errors.New("brokers: the task is not in a state this action applies to")
	// ErrBadTakeAll is wrapped by the error of Inspector.TakeAll for an
	// action a status does not take (CheckTakeAll).
	ErrBadTakeAll = errors.New("brokers: no such action on a queue's tasks in that state")
	// ErrQueueNotEmpty is wrapped by the error of a queue's removal
	// refused because it holds tasks (unless forced) or runs some.
	ErrQueueNotEmpty = errors.New("brokers: the queue holds tasks")
	// ErrChordDue is returned by StateBroker.AckSuccess for a member of a
	// group with a chord callback whose success completed its group: its
	// state, its record in the group and its outcome (as Commit's) are
	// written, and the task is not acknowledged, its lease still held: the
	// caller elects the member that sends the callback, then acknowledges.
	ErrChordDue = errors.New("brokers: the chord member completed its group; elect the callback's sender, then acknowledge")
	// ErrClosed is returned by a broker that was closed.
	ErrClosed = errors.New("brokers: broker closed")
	// ErrMessageTooLarge is wrapped by the error of a send whose task's
	// message (its signature as sent) is larger than
	// config.Config.MaxMessageSize: a *MessageTooLargeError. Nothing of the
	// send reaches the broker.
	ErrMessageTooLarge = errors.New("brokers: message too large")
	// ErrNoQueue is returned when an operation is given no queue name.
	ErrNoQueue = errors.New("brokers: no queue given")
	// ErrNotSent is wrapped by the error of a Publish that published
	// nothing: no request reached the broker (the context ended before it
	// went out, the broker was closed, the signature was refused before
	// sending), or the broker refused it (ErrDuplicateTask, ErrNoAggregator,
	// a task that is not unique or was cancelled). Sending it again is a
	// first send.
	ErrNotSent = errors.New("brokers: not sent")
	// ErrMaybeSent is wrapped by the error of a Publish whose tasks may
	// have been published: a request went out and its reply never came
	// (the context ended first, or the connection failed or timed out),
	// or a part of it was published before another failed. Such a task may
	// be queued and may run. Whether it was can be looked up by its UUID:
	// the broker holds it (Inspector.GetTask, Claimer.Holds), or its state
	// is past PENDING. Publishing the same signature again (the same UUID)
	// is refused with ErrDuplicateTask while the first copy is held, so it
	// does not run twice then; once the first copy has run and been
	// forgotten (CompletedRetention), a copy published again runs again.
	ErrMaybeSent = errors.New("brokers: may have been sent")
	// ErrTaskFinished is returned by an operator's action on a task that
	// has finished: there is nothing to act on.
	ErrTaskFinished = errors.New("machinist: the task has finished")
	// ErrAuth is wrapped by errors that say Redis wants credentials the
	// URL lacks, or refused those given. Brokers and backends both return it.
	ErrAuth = errors.New("Redis requires authentication, or refused the credentials given: " +
		`put them in the URL ("redis://:password@host:port" or "redis://user:password@host:port")`)
)

// Errors of result backends (the states half of the store).
var (
	// ErrStateNotFound is returned for a task that has no state: it was
	// never sent, or its state was purged or expired.
	ErrStateNotFound = errors.New("backends: task state not found")
	// ErrGroupNotFound is returned for a group that has no bookkeeping.
	ErrGroupNotFound = errors.New("backends: group not found")
	// ErrWorkflowNotFound is returned for a UUID that names no recorded
	// workflow, nor a task of one (Workflows.GetWorkflowContext).
	ErrWorkflowNotFound = errors.New("backends: workflow not found")
	// ErrBackendClosed is returned by a backend that was closed.
	ErrBackendClosed = errors.New("backends: backend closed")
)

// MessageTooLargeError is the error of a Publish refused because a
// task's message is larger than the limit (config.Config.MaxMessageSize).
// It wraps ErrMessageTooLarge.
type MessageTooLargeError struct {
	Task  string // the task's UUID
	Name  string // the task's name
	Size  int    // the message's size in bytes
	Limit int    // the largest size allowed, in bytes
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("task %s (%s) not sent: its message is %d bytes, over the limit of %d bytes (MaxMessageSize)",
		e.Task, e.Name, e.Size, e.Limit)
}

// Unwrap returns ErrMessageTooLarge.
func (e *MessageTooLargeError) Unwrap() error { return ErrMessageTooLarge }

// CheckMessageSize returns a *MessageTooLargeError when msg, the message
// of sig, is larger than limit; a limit of 0 or less allows any size.
func CheckMessageSize(sig *tasks.Signature, msg []byte, limit int) error {
	if limit <= 0 || len(msg) <= limit {
		return nil
	}
	return &MessageTooLargeError{Task: sig.UUID, Name: sig.Name, Size: len(msg), Limit: limit}
}

// CancelledError is the error of a Publish refused because the task was
// cancelled before it was sent (Canceller.CancelTask with a bar: a task of
// a cancelled workflow that a finishing task was about to send). It wraps
// tasks.ErrTaskCancelled; Reason is the cancellation's.
type CancelledError struct {
	Task   string // the task's UUID
	Reason string
}

func (e *CancelledError) Error() string {
	return "task " + e.Task + " was cancelled before it was sent: " + e.Reason
}

// Unwrap returns tasks.ErrTaskCancelled.
func (e *CancelledError) Unwrap() error { return tasks.ErrTaskCancelled }

// NotSent returns err, the error of a Publish that published nothing,
// wrapping ErrNotSent too.
func NotSent(err error) error { return fmt.Errorf("%w (%w)", err, ErrNotSent) }

// MaybeSent returns err, the error of a Publish whose tasks may have been
// published, wrapping ErrMaybeSent too.
func MaybeSent(err error) error { return fmt.Errorf("%w (%w)", err, ErrMaybeSent) }
