package rdb

import (
	"context"
	"embed"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

//go:embed lua/*.lua lua/lib/*.lua
var luaFiles embed.FS

// luaLib is the Lua every script starts with: the local functions of
// lua/lib (now_ms; holds, settled_by, check_settle; limit_admit,
// limit_free, limit_release, limit_unplace; free_unique, release_unique,
// release_holds,
// forget; write_state; record_member; held, put, wake, given_or_all,
// trim_archive, unplace; agg_prefix, agg_split, agg_policy, agg_schedule,
// agg_count, agg_wake, agg_file, agg_join, agg_file_new), so that the
// fence check, the end of an acknowledgement, the state write, the group
// record and an aggregation group's filing are each written once.
var luaLib = func() string {
	var b strings.Builder
	for _, name := range []string{"now", "fence", "limit", "forget", "state", "group", "queue", "aggregate"} {
		src, err := luaFiles.ReadFile("lua/lib/" + name + ".lua")
		if err != nil {
			panic(fmt.Sprintf("rdb: missing embedded Lua library %s: %v", name, err))
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String()
}()

func loadScript(name string) *goredis.Script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("rdb: missing embedded script %s: %v", name, err))
	}
	return goredis.NewScript(luaLib + string(src))
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
	stateUnlessFinalScript = loadScript("state_unless_final")

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
var pipelined = []*goredis.Script{groupDoneScript, stateUnlessFinalScript}

// Status codes the task scripts return.
const (
	statusOK        = 0
	statusDuplicate = 1
	statusLeaseLost = 2
)

// statusError maps a task script's status code to an error for task id.
func statusError(code int64, id string) error {
	switch code {
	case statusOK:
		return nil
	case statusDuplicate:
		return fmt.Errorf("task %s: %w", id, brokers.ErrDuplicateTask)
	case statusLeaseLost:
		return fmt.Errorf("task %s: %w", id, brokers.ErrLeaseLost)
	case statusNoHandler:
		return fmt.Errorf("task %s: %w", id, errNoHandler)
	case statusNoAggregator:
		return fmt.Errorf("task %s: %w", id, brokers.ErrNoAggregator)
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
		return false, fmt.Errorf("trigger chord of group %s: %w", groupUUID, backends.ErrGroupNotFound)
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
	err := again(ctx, func() error {
		cmd = s.batch.repl.eval(ctx, s.client, true, script, keys, args)
		return cmd.Err()
	}, retry{while: holds, before: func() { args[0] = "1" }})
	return cmd, err
}
