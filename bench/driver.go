package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The task names every driver knows. Handlers are given by the workload.
const (
	taskNoop  = "noop"  // no arguments; does nothing
	taskStamp = "stamp" // one argument, a unix-nanosecond time; records when it starts
	taskSleep = "sleep" // one argument, a task number; the crash workload's two-second task
	taskAdd   = "add"   // adds its arguments
	taskSum   = "sum"   // the chord callback: adds its arguments
	// taskMember is an aggregation member: one argument, its id, sent with
	// Task.Group; taskBatch the task its aggregator builds from a batch of
	// members, the members' arguments in order as its own.
	taskMember = "member"
	taskBatch  = "batch"
)

// HandlerFunc is a task body: it receives the task's int64 arguments and
// returns one int64 result.
type HandlerFunc func(args []int64) (int64, error)

// Handlers maps task names to their bodies; a driver registers each with
// its library in the library's own way.
type Handlers map[string]HandlerFunc

// Task is what a workload sends.
type Task struct {
	Name string
	Args []int64
	ETA  time.Time // zero: now
	// Group, when set, makes the task an aggregation member of the group
	// of its name and Group (machinist's AggregationKey, asynq.Group).
	Group string
}

// Aggregation is when a group of members is released as one task.
type Aggregation struct {
	MaxSize     int
	MaxDelay    time.Duration
	GracePeriod time.Duration
}

// AggregatingDriver is a Driver whose library aggregates tasks.
type AggregatingDriver interface {
	Driver
	// OpenAggregating is Open, and has the workers started later release
	// the taskMember tasks of each Group by agg as one taskBatch task whose
	// arguments are the members' arguments, oldest member first. Once
	// StartWorker has returned, members are accepted.
	OpenAggregating(ctx context.Context, addr string, h Handlers, agg Aggregation) error
}

// BatchDriver is a library that sends a batch of independent tasks in
// one call (machinist's SendTasks), not as a group.
type BatchDriver interface {
	SendBatch(ctx context.Context, ts []Task) error
}

// errNA is returned for what a library does not have (asynq's workflows,
// results on machinery's null backend, bulk sends).
var errNA = errors.New("not supported by this library")

// Driver is the small common interface each library is run through. A
// Driver is opened once per run and closed after it; every workload starts
// from a flushed Redis.
type Driver interface {
	// Name is the library column: machinist, asynq, machinery, machinery-null.
	Name() string
	// Open connects to Redis at addr and registers h, so that workers
	// started later run them. Logging is off.
	Open(ctx context.Context, addr string, h Handlers) error
	// Close releases what Open made. Workers must be stopped first.
	Close()
	// Send enqueues one task, the way a user of the library would.
	Send(ctx context.Context, t Task) error
	// SendBulk enqueues ts through the library's bulk path (errNA if none).
	SendBulk(ctx context.Context, ts []Task) error
	// StartWorker starts an in-process worker with the given concurrency;
	// stop stops it gracefully and returns once it has stopped.
	StartWorker(concurrency int) (stop func(), err error)
	// Chord sends a chord of taskAdd members (one per element of members,
	// with those arguments) and a taskSum callback, and waits for the
	// callback's result (errNA without workflows or results).
	Chord(ctx context.Context, members [][]int64) (int64, error)
	// Chain sends a chain of taskAdd tasks with the given arguments, each
	// receiving the previous result, and waits for the last result.
	Chain(ctx context.Context, steps [][]int64) (int64, error)
	// Outstanding counts the tasks the broker still holds: pending,
	// scheduled, retrying and leased (where the library tracks them).
	Outstanding(ctx context.Context) (int, error)
}

// allLibs are the library columns, in table order. machinist-otel is
// machinist with the OpenTelemetry SDK (every span batched to an exporter
// that drops it, every metric aggregated): it runs only when named, to
// measure what telemetry costs.
var allLibs = []string{"machinist", "machinist-otel", "asynq", "machinery", "machinery-null", "bullmq"}

// defaultLibs are the libraries run when -libs is not given. bullmq runs
// only the flow workload (bullmq/flow.js, under Node.js).
var defaultLibs = []string{"machinist", "asynq", "machinery", "machinery-null", "bullmq"}

func newDriver(name string) (Driver, error) {
	switch name {
	case "machinist":
		return &machinistDriver{}, nil
	case "machinist-otel":
		return &machinistDriver{otel: true}, nil
	case "asynq":
		return &asynqDriver{}, nil
	case "machinery":
		return &machineryDriver{results: true}, nil
	case "machinery-null":
		return &machineryDriver{results: false}, nil
	}
	return nil, fmt.Errorf("unknown library %q (want one of %v)", name, allLibs)
}

// encodeArgs and decodeArgs carry int64 arguments in an asynq payload.
func encodeArgs(args []int64) []byte {
	if len(args) == 0 {
		return nil
	}
	b := make([]byte, 8*len(args))
	for i, a := range args {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(a))
	}
	return b
}

func decodeArgs(b []byte) ([]int64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("payload of %d bytes is not a list of int64", len(b))
	}
	args := make([]int64, len(b)/8)
	for i := range args {
		args[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return args, nil
}
