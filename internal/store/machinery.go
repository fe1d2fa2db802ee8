package store

import (
	"context"

	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// MachineryBroker is machinery v1's Broker interface, method for method:
// what Server.SetBroker takes (as brokers/iface.Broker). machinist's
// brokers have it beside Broker; a broker written for machinery has only
// it, and runs with machinery's semantics: its StartConsuming hands each
// task to TaskProcessor.Process, and nothing is leased.
type MachineryBroker interface {
	// GetConfig returns the config the broker was made with.
	GetConfig() *config.Config
	// SetRegisteredTaskNames records the names of the tasks registered on
	// the Server; Server.RegisterTask(s) calls it.
	SetRegisteredTaskNames(names []string)
	// IsTaskRegistered reports whether name is among those recorded.
	IsTaskRegistered(name string) bool
	// StartConsuming hands the tasks of p's queue to p until
	// StopConsuming, and returns whether the caller should call it again
	// (retry) and why it stopped.
	StartConsuming(consumerTag string, concurrency int, p TaskProcessor) (retry bool, err error)
	// StopConsuming stops every StartConsuming of the broker.
	StopConsuming()
	// Publish sends one task to the queue its RoutingKey names, or to the
	// default queue when it has none, without writing its state.
	Publish(ctx context.Context, task *tasks.Signature) error
	// GetPendingTasks lists the pending tasks of queue (the default queue
	// when empty).
	GetPendingTasks(queue string) ([]*tasks.Signature, error)
	// GetDelayedTasks lists the tasks waiting for their ETA.
	GetDelayedTasks() ([]*tasks.Signature, error)
	// AdjustRoutingKey sets an empty RoutingKey to the default queue.
	AdjustRoutingKey(s *tasks.Signature)
}

// TaskProcessor is what a broker's StartConsuming hands tasks to:
// machinery's interface, which machinist's Worker satisfies.
type TaskProcessor interface {
	// Process runs the task to the end: its states are written and what
	// follows it is sent. An error says the broker should stop consuming.
	Process(signature *tasks.Signature) error
	// CustomQueue is the worker's queue, or "" for the default queue.
	CustomQueue() string
	// PreConsumeHandler reports whether the worker takes more tasks now.
	PreConsumeHandler() bool
}

// MachineryBackend is machinery v1's Backend interface, method for
// method: what Server.SetBackend takes (as backends/iface.Backend).
// machinist's backends have it beside Backend, whose methods it runs on
// context.Background(); a backend written for machinery has only it.
type MachineryBackend interface {
	InitGroup(groupUUID string, taskUUIDs []string) error
	GroupCompleted(groupUUID string, groupTaskCount int) (bool, error)
	GroupTaskStates(groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error)
	// TriggerChord returns true to the first caller for the group, and
	// false to every later one.
	TriggerChord(groupUUID string) (bool, error)
	SetStatePending(signature *tasks.Signature) error
	SetStateReceived(signature *tasks.Signature) error
	SetStateStarted(signature *tasks.Signature) error
	SetStateRetry(signature *tasks.Signature) error
	SetStateSuccess(signature *tasks.Signature, results []*tasks.TaskResult) error
	SetStateFailure(signature *tasks.Signature, err string) error
	GetState(taskUUID string) (*tasks.TaskState, error)
	// IsAMQP reports whether results are kept as AMQP messages; false for
	// every backend machinist runs.
	IsAMQP() bool
	PurgeState(taskUUID string) error
	PurgeGroupMeta(groupUUID string) error
}
