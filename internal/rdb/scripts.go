package rdb

import (
	"context"
	"embed"
	"fmt"
	"regexp"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/store"
)

//go:embed lua/*.lua lua/lib/*.lua
var luaFiles embed.FS

// libNames are the files of lua/lib, in the order their local
// definitions are written (a definition uses only those before it), so
// that the fence check, the end of an acknowledgement, the state write,
// the group record, a take and an aggregation group's filing are each
// written once; libDefs reads the definitions from them.
var libNames = []string{"now", "due", "fence", "limit", "forget", "state", "group", "queue", "aggregate"}

// libDef is one top-level definition of lua/lib (a local function or
// table, with the comment above it), the name it defines and the
// identifiers its code names.
type libDef struct {
	name  string
	src   string
	names []string
}

var (
	luaIdent = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	luaLocal = regexp.MustCompile(`^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)
)

// libDefs are the definitions of lua/lib, in libNames' order.
var libDefs = func() []libDef {
	var defs []libDef
	for _, file := range libNames {
		b, err := luaFiles.ReadFile("lua/lib/" + file + ".lua")
		if err != nil {
			panic(fmt.Sprintf("rdb: missing embedded Lua library %s: %v", file, err))
		}
		lines := strings.SplitAfter(string(b), "\n")
		var starts []int // each definition's first line, its comment included
		var names []string
		for i, line := range lines {
			m := luaLocal.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			first := i
			for first > 0 && strings.HasPrefix(lines[first-1], "--") && (len(starts) == 0 || first-1 > starts[len(starts)-1]) {
				first--
			}
			starts = append(starts, first)
			names = append(names, m[1])
		}
		if len(starts) == 0 || strings.TrimSpace(luaCode(strings.Join(lines[:starts[0]], ""))) != "" {
			panic(fmt.Sprintf("rdb: Lua library %s has code outside its local definitions", file))
		}
		for j, first := range starts {
			end := len(lines)
			if j+1 < len(starts) {
				end = starts[j+1]
			}
			src := strings.Join(lines[first:end], "")
			if !strings.HasSuffix(src, "\n") {
				src += "\n"
			}
			defs = append(defs, libDef{name: names[j], src: src, names: luaIdent.FindAllString(luaCode(src), -1)})
		}
	}
	return defs
}()

// luaCode returns src without its comments ("--" to the end of a line,
// outside string literals; lua/ has no long comments or long strings).
func luaCode(src string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		var quote byte
		cut := len(line)
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case quote != 0 && c == '\\':
				i++
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '-' && i+1 < len(line) && line[i+1] == '-':
				cut = i
				i = len(line)
			}
		}
		b.WriteString(line[:cut])
		if cut < len(line) {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// luaLibFor returns the Lua a script with source src starts with: the
// definitions of lua/lib its code names, and those they name in turn, in
// libDefs' order. A script run defines again every function it starts
// with (EVALSHA runs the whole body), so a script carries only those it
// may call.
func luaLibFor(src string) string {
	named := make(map[string]bool)
	for _, id := range luaIdent.FindAllString(luaCode(src), -1) {
		named[id] = true
	}
	in := make([]bool, len(libDefs))
	for changed := true; changed; {
		changed = false
		for i, d := range libDefs {
			if in[i] || !named[d.name] {
				continue
			}
			in[i], changed = true, true
			for _, id := range d.names {
				named[id] = true
			}
		}
	}
	var b strings.Builder
	for i, d := range libDefs {
		if in[i] {
			b.WriteString(d.src)
		}
	}
	return b.String()
}

// libMark is the line of a script above which its prelude is: code that
// runs before the lib definitions are made (each run makes them again, a
// closure each), so that a common case that needs none of them can return
// without paying for them. A script without it starts with its lib.
const libMark = "-- lib definitions here\n"

func loadScript(name string) *goredis.Script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("rdb: missing embedded script %s: %v", name, err))
	}
	return goredis.NewScript(withLib(string(src)))
}

// withLib returns src with the lib definitions it names (luaLibFor)
// inserted at its libMark line, or at its start.
func withLib(src string) string {
	prelude, body, ok := strings.Cut(src, libMark)
	if !ok {
		prelude, body = "", src
	}
	return prelude + luaLibFor(src) + "\n" + body
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
	err := again(ctx, func() error {
		cmd = s.batch.repl.eval(ctx, s.client, true, script, keys, args)
		return cmd.Err()
	}, retry{while: holds, before: func(bool) { args[0] = "1" }})
	return cmd, err
}
