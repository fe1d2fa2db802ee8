package rdb

import (
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/lua"
	"github.com/b6192125/machinist/internal/store"
)

// loadScript returns the script lua/name.lua, linked with its lib.
func loadScript(name string) *goredis.Script {
	return goredis.NewScript(lua.Linked(name))
}

// The scripts, one per atomic transition. Each file opens with its KEYS,
// ARGV and return contract; transport/retry.go says how each is sent
// again after an error that leaves unknown whether it ran.
var (
	// A task's life in its queue (publish.go, fetch.go, lease.go,
	// settle.go).
	enqueueScript    = loadScript("enqueue")
	dequeueScript    = loadScript("dequeue")
	releaseScript    = loadScript("release_fetch")
	extendScript     = loadScript("extend")
	ackScript        = loadScript("ack")
	ackSuccessScript = loadScript("ack_success")
	retryScript      = loadScript("retry")
	archiveScript    = loadScript("archive")
	requeueScript    = loadScript("requeue")
	commitScript     = loadScript("commit")

	// Routing tasks to the workers that have them (route.go).
	announceScript = loadScript("announce")
	rerouteScript  = loadScript("reroute")
	unrouteScript  = loadScript("unroute")

	// Maintenance (maintenance.go).
	forwardScript = loadScript("forward")
	recoverScript = loadScript("recover")
	electScript   = loadScript("elect")
	resignScript  = loadScript("resign")

	// Inspection (inspect.go, cancel.go).
	requeueArchivedScript = loadScript("requeue_archived")
	deleteArchivedScript  = loadScript("delete_archived")
	takeWaitingScript     = loadScript("take_waiting")
	takeAllScript         = loadScript("take_all")
	cancelScript          = loadScript("cancel")
	bandsScript           = loadScript("bands")

	// States (state.go).
	setStateScript   = loadScript("set_state")
	getStateScript   = loadScript("get_state")
	purgeStateScript = loadScript("purge_state")
	withdrawScript   = loadScript("withdraw")

	// A group's bookkeeping (group.go).
	groupDoneScript    = loadScript("group_done")
	initGroupScript    = loadScript("init_group")
	triggerChordScript = loadScript("trigger_chord")

	// What a running task keeps (taskdata.go).
	taskDataScript = loadScript("task_data")

	// Workflows of any shape (graph.go).
	graphDoneScript = loadScript("graph_done")
	graphFailScript = loadScript("graph_fail")

	// Claims of periodic ticks (claim.go).
	claimLeaseScript    = loadScript("claim_lease")
	completeClaimScript = loadScript("complete_claim")

	// The worker registry (monitor.go).
	heartbeatScript = loadScript("heartbeat")
	workersScript   = loadScript("workers")

	// Aggregation (aggregate.go).
	announceAggregatorsScript = loadScript("announce_aggregators")
	claimBatchScript          = loadScript("claim_batch")
	completeBatchScript       = loadScript("complete_batch")
	retryBatchScript          = loadScript("retry_batch")
	extendBatchScript         = loadScript("extend_batch")
	handBatchScript           = loadScript("hand_batch")
	publishHandedScript       = loadScript("publish_handed")
	forgetBatchScript         = loadScript("forget_batch")
	archiveBatchScript        = loadScript("archive_batch")

	// machinery's layout, for the migration mode (machinery.go).
	moveDueScript = loadScript("move_due")
)

// pipelined are the scripts sent inside pipelines, where EVALSHA cannot
// fall back to EVAL: Store loads them before their first use.
var pipelined = []*goredis.Script{groupDoneScript, setStateScript}

// Status codes the task scripts return.
const (
	statusOK        = 0
	statusDuplicate = 1
	statusLeaseLost = 2
	// statusChordDue: ack_success.lua wrote a chord member's success,
	// which completed its group, and did not settle it.
	statusChordDue = 8
)

// statusNotUnique is enqueue.lua's answer for a unique task whose key
// another task holds: {5, id, holder}.
const statusNotUnique = 5

// statusReplaced is enqueue.lua's answer for a unique task that debounces
// and replaced the message and ETA of the holder of its key: {6, id,
// holder}.
const statusReplaced = 6

// statusCancelled is enqueue.lua's answer for a task kept out by the
// cancellation of its workflow (cancel.lua with a bar): {7, id, reason}.
const statusCancelled = 7

// statusError maps a task script's status code to an error for task id.
func statusError(code int64, id string) error {
	switch code {
	case statusOK:
		return nil
	case statusDuplicate:
		return fmt.Errorf("task %s: %w", id, store.ErrDuplicateTask)
	case statusLeaseLost:
		return fmt.Errorf("task %s: %w", id, store.ErrLeaseLost)
	case statusChordDue:
		return fmt.Errorf("task %s: %w", id, store.ErrChordDue)
	case statusNoHandler:
		return fmt.Errorf("task %s: %w", id, errNoHandler)
	case statusNoAggregator:
		return fmt.Errorf("task %s: %w", id, store.ErrNoAggregator)
	default:
		return fmt.Errorf("task %s: unexpected script status %d", id, code)
	}
}

// Status codes trigger_chord returns.
const (
	chordLost     = 0
	chordElected  = 1
	chordNotFound = 2
)

// chordResult maps trigger_chord's status code to TriggerChord's answer.
func chordResult(code int64, groupUUID, memberUUID string) (bool, error) {
	switch code {
	case chordElected:
		return true, nil
	case chordLost:
		return false, nil
	case chordNotFound:
		return false, fmt.Errorf("trigger chord of group %s: %w", groupUUID, store.ErrGroupNotFound)
	default:
		return false, fmt.Errorf("trigger chord of group %s by task %s: unexpected script status %d", groupUUID, memberUUID, code)
	}
}
