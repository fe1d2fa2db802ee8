package rdb

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/lua"
	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
)

// loadScript returns the script lua/name.lua, linked with its lib.
func loadScript(name string) *goredis.Script {
	return goredis.NewScript(lua.Linked(name))
}

// The scripts, one per atomic transition. Each file opens with its KEYS,
// ARGV and return contract.
var (
	// A task's life in its queue.
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

	// Maintenance.
	forwardScript = loadScript("forward")
	recoverScript = loadScript("recover")
	electScript   = loadScript("elect")
	resignScript  = loadScript("resign")

	// Inspection.
	requeueArchivedScript = loadScript("requeue_archived")
	deleteArchivedScript  = loadScript("delete_archived")
	takeWaitingScript     = loadScript("take_waiting")
	cancelScript          = loadScript("cancel")

	// States.
	setStateScript = loadScript("set_state")
	getStateScript = loadScript("get_state")
	withdrawScript = loadScript("withdraw")

	// A group's bookkeeping.
	groupDoneScript    = loadScript("group_done")
	initGroupScript    = loadScript("init_group")
	triggerChordScript = loadScript("trigger_chord")

	// Claims (periodic ticks).
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

// runSettle runs a settle script of task id directly, as
// Batcher.RunSettle does through the batcher, and maps its status code.
func (s *Store) runSettle(ctx context.Context, script *goredis.Script, id string, holds func() bool, keys []string, args ...interface{}) error {
	cmd, err := s.evalSettle(ctx, script, holds, keys, args)
	var code int64
	if err == nil {
		code, err = cmd.Int64()
	}
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	return statusError(code, id)
}

// evalSettle runs a settle script (its first argument the "again" flag
// lib/fence.lua's check_settle reads, prepended to args) as a command
// go-redis does not send a second time, and sends it again, flagged, for
// as long as holds says the caller holds its lease.
func (s *Store) evalSettle(ctx context.Context, script *goredis.Script, holds func() bool, keys []string, args []interface{}) (*goredis.Cmd, error) {
	args = append([]interface{}{"0"}, args...)
	var cmd *goredis.Cmd
	err := transport.Again(ctx, func() error {
		cmd = s.repl.Eval(ctx, s.client, true, script, keys, args)
		return cmd.Err()
	}, transport.Retry{While: holds, Before: func(bool) { args[0] = "1" }})
	return cmd, err
}
