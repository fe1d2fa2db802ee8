package iface

import (
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// The broker's vocabulary is declared in one internal package, shared with
// the store that implements it; these names are the same types.
type (
	Delivery   = store.Delivery
	Take       = store.Take
	Lease      = store.Lease
	TaskNames  = store.TaskNames
	TaskStatus = store.TaskStatus
	TaskInfo   = store.TaskInfo
	QueueInfo  = store.QueueInfo
	TakeAction = store.TakeAction
	TakenPage  = store.TakenPage

	ClaimStatus = store.ClaimStatus
	ClaimResult = store.ClaimResult

	PeriodicEntry = store.PeriodicEntry
	PeriodicTick  = store.PeriodicTick

	AggregationPolicy = store.AggregationPolicy
	AggregationInfo   = store.AggregationInfo
	Batch             = store.Batch

	WorkerInfo = store.WorkerInfo
	StatCount  = store.StatCount
	QueueStats = store.QueueStats
	DayCount   = store.DayCount

	MessageTooLargeError = store.MessageTooLargeError
	CancelledError       = store.CancelledError
)

// What a broker may offer besides Broker, each checked for by the Server
// and Worker; both of machinist's brokers offer all of them.
type (
	Relay      = store.Relay
	Claimer    = store.Claimer
	Pauser     = store.Pauser
	Inspector  = store.Inspector
	Canceller  = store.Canceller
	Aggregator = store.Aggregator
	Monitor    = store.Monitor
)

// The places a task can be in a queue (see TaskStatus).
const (
	StatusPending     = store.StatusPending
	StatusActive      = store.StatusActive
	StatusScheduled   = store.StatusScheduled
	StatusRetry       = store.StatusRetry
	StatusArchived    = store.StatusArchived
	StatusLimited     = store.StatusLimited
	StatusAggregating = store.StatusAggregating
	StatusCompleted   = store.StatusCompleted
)

// What ClaimLease found (see ClaimStatus).
const (
	ClaimWon  = store.ClaimWon
	ClaimHeld = store.ClaimHeld
	ClaimDone = store.ClaimDone
)

// The actions of Inspector.TakeWaiting.
const (
	TakeDelete  = store.TakeDelete
	TakeArchive = store.TakeArchive
	TakeRun     = store.TakeRun
)

// The period of a worker's statistics and how far back they are kept (see
// Monitor).
const (
	StatsPeriod = store.StatsPeriod
	StatsWindow = store.StatsWindow
	HistoryDays = store.HistoryDays
)

// HistoryDay returns the start (UTC) of the day t falls in: a day of
// Monitor.QueueHistory.
func HistoryDay(t time.Time) time.Time { return store.HistoryDay(t) }

// Errors of brokers, the same values as the store's: implementations wrap
// them with %w, so callers branch with errors.Is. Each is documented where
// it is declared, in internal/store.
var (
	ErrLeaseLost       = store.ErrLeaseLost
	ErrDuplicateTask   = store.ErrDuplicateTask
	ErrShardKeys       = store.ErrShardKeys
	ErrTaskNotFound    = store.ErrTaskNotFound
	ErrTaskNotWaiting  = store.ErrTaskNotWaiting
	ErrBadTakeAll      = store.ErrBadTakeAll
	ErrQueueNotEmpty   = store.ErrQueueNotEmpty
	ErrChordDue        = store.ErrChordDue
	ErrClosed          = store.ErrClosed
	ErrMessageTooLarge = store.ErrMessageTooLarge
	ErrNoQueue         = store.ErrNoQueue
	ErrNotSent         = store.ErrNotSent
	ErrMaybeSent       = store.ErrMaybeSent
	ErrAuth            = store.ErrAuth
	ErrNoAggregator    = store.ErrNoAggregator
	// ErrUnsupported is wrapped by the error of an operation the broker
	// or backend does not offer (a broker of your own that is no
	// Canceller, asked to cancel).
	ErrUnsupported = store.ErrUnsupported
)

// NotSent returns err wrapping ErrNotSent, for a broker of your own whose
// Publish sent nothing.
func NotSent(err error) error { return store.NotSent(err) }

// MaybeSent returns err wrapping ErrMaybeSent, for a broker of your own
// whose Publish may have sent its tasks.
func MaybeSent(err error) error { return store.MaybeSent(err) }

// NewLease returns a lease held by token until expiresAt, for a broker of
// your own to hand out with its deliveries.
func NewLease(token string, expiresAt time.Time) *Lease { return store.NewLease(token, expiresAt) }

// NewTaskNames returns the set of names, for Fetch and Announce.
func NewTaskNames(names []string) *TaskNames { return store.NewTaskNames(names) }

// ShardOf reports whether name is a shard of a queue, and of which (see
// config.RedisConfig.QueueShards).
func ShardOf(name string) (queue string, ok bool) { return store.ShardOf(name) }

// LogicalQueue returns the queue name is a shard of, or name itself.
func LogicalQueue(name string) string { return store.LogicalQueue(name) }
