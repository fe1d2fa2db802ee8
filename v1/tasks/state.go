package tasks

import "time"

// The states a task moves through. PENDING is written when it is sent,
// STARTED by the worker that runs it (machinist's worker skips RECEIVED,
// which STARTED would replace at once), RETRY when it will run
// again, and SUCCESS or FAILURE when it is done for good.
const (
	StatePending  = "PENDING"
	StateReceived = "RECEIVED"
	StateStarted  = "STARTED"
	StateRetry    = "RETRY"
	StateSuccess  = "SUCCESS"
	StateFailure  = "FAILURE"
)

// TaskResult is one return value of a task: its Go type name and its value.
type TaskResult struct {
	Type  string      `bson:"type"`
	Value interface{} `bson:"value"`
}

// TaskState is what a result backend stores for a task.
type TaskState struct {
	TaskUUID  string        `bson:"_id"`
	TaskName  string        `bson:"task_name"`
	State     string        `bson:"state"`
	Results   []*TaskResult `bson:"results"`
	Error     string        `bson:"error"`
	CreatedAt time.Time     `bson:"created_at"`
	TTL       int64         `bson:"ttl,omitempty"`
	// Aggregate, on the PENDING state of an aggregation member, is the
	// UUID of the task it was aggregated into: the member's outcome is
	// that task's (result.AsyncResult follows it). machinist extension.
	Aggregate string `bson:"aggregate,omitempty"`
	// Trace, on the SUCCESS state of a chord member written by a worker,
	// names the span that ran it, as a W3C traceparent, so that the chord's
	// callback links to every member's span; empty when it was not traced.
	// machinist extension.
	Trace string `json:",omitempty" bson:"trace,omitempty"`
}

// GroupMeta is what a result backend stores for a group.
type GroupMeta struct {
	GroupUUID      string    `bson:"_id"`
	TaskUUIDs      []string  `bson:"task_uuids"`
	ChordTriggered bool      `bson:"chord_triggered"`
	Lock           bool      `bson:"lock"`
	CreatedAt      time.Time `bson:"created_at"`
	TTL            int64     `bson:"ttl,omitempty"`
}

func newState(sig *Signature, state string) *TaskState {
	return &TaskState{
		TaskUUID:  sig.UUID,
		TaskName:  sig.Name,
		State:     state,
		CreatedAt: time.Now().UTC(),
	}
}

// NewPendingTaskState returns the PENDING state of sig.
func NewPendingTaskState(sig *Signature) *TaskState { return newState(sig, StatePending) }

// NewReceivedTaskState returns the RECEIVED state of sig.
func NewReceivedTaskState(sig *Signature) *TaskState { return newState(sig, StateReceived) }

// NewStartedTaskState returns the STARTED state of sig.
func NewStartedTaskState(sig *Signature) *TaskState { return newState(sig, StateStarted) }

// NewRetryTaskState returns the RETRY state of sig.
func NewRetryTaskState(sig *Signature) *TaskState { return newState(sig, StateRetry) }

// NewSuccessTaskState returns the SUCCESS state of sig with its results.
func NewSuccessTaskState(sig *Signature, results []*TaskResult) *TaskState {
	s := newState(sig, StateSuccess)
	s.Results = results
	return s
}

// NewAggregatedTaskState returns the state of sig, a member of the
// aggregate aggregateUUID: PENDING, pointing at it.
func NewAggregatedTaskState(sig *Signature, aggregateUUID string) *TaskState {
	s := newState(sig, StatePending)
	s.Aggregate = aggregateUUID
	return s
}

// NewFailureTaskState returns the FAILURE state of sig with its error.
func NewFailureTaskState(sig *Signature, err string) *TaskState {
	s := newState(sig, StateFailure)
	s.Error = err
	return s
}

// IsCompleted reports whether the task is done for good: SUCCESS or FAILURE.
func (s *TaskState) IsCompleted() bool {
	return s.IsSuccess() || s.IsFailure()
}

// IsSuccess reports whether the task succeeded.
func (s *TaskState) IsSuccess() bool {
	return s.State == StateSuccess
}

// IsFailure reports whether the task failed for good.
func (s *TaskState) IsFailure() bool {
	return s.State == StateFailure
}
