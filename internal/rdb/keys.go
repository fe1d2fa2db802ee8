package rdb

import (
	"fmt"
	"strings"
	"sync"

	"github.com/b6192125/machinist/internal/store"
)

// keys builds every Redis key machinist uses; nothing else in the module
// spells one. Keys of one queue share the hash tag {queue}, and keys of one
// group the hash tag {group}, so each queue and each group lives in one
// Redis Cluster slot and every script touches one slot.
//
//	<prefix>:queues                 set of queue names (a sharded queue's
//	                                shards among them: shards.go)
//	<prefix>:shards                 hash: queue → the suffixes k of its
//	                                shards, the queues <queue>{k
//	<prefix>:{<queue>}:pending      list of task ids, head runs first
//	<prefix>:{<queue>}:lease        zset of active task ids by lease expiry (ms)
//	<prefix>:{<queue>}:scheduled    zset of task ids by ETA (ms)
//	<prefix>:{<queue>}:retry        zset of task ids by retry time (ms)
//	<prefix>:{<queue>}:archived     zset of dead letters by archive time (ms)
//	<prefix>:{<queue>}:completed    zset of completed task ids by expiry (ms)
//	<prefix>:{<queue>}:paused       exists while the queue is paused
//	<prefix>:{<queue>}:adopted      on a shard (<q>{k), exists once a
//	                                process made it follow q's pause
//	                                (shards.go)
//	<prefix>:{<queue>}:notify       list of wake-up tokens for idle workers
//	<prefix>:{<queue>}:maintainer   string: the id of the process that runs
//	                                the queue's forwarder and recoverer
//	<prefix>:{<queue>}:t:<task id>  hash: msg (JSON signature without its
//	                                UUID and queue), state, at (sent, ms),
//	                                lease (fencing token),
//	                                lease_exp, outcome (committed), retried,
//	                                recovered, error, failed_at, process_at,
//	                                pub (the publish's token), settled (the
//	                                lease it was last settled under),
//	                                rerouted (the name it waits for),
//	                                unique (the unique key it holds),
//	                                limit (its tasks.Limit, lib/limit.lua),
//	                                limit_slot (the start its rate booked);
//	                                or, for a task its workflow's
//	                                cancellation keeps out, only state
//	                                "cancelled" and error, until it expires
//	<prefix>:state:<task id>        hash: state, name, results, error,
//	                                created_at (ms), aggregate, workflow,
//	                                pub (its publish's token, kept while its
//	                                task hash is in reach);
//	                                on a single server, none until a
//	                                state is written (PENDING implicit)
//	<prefix>:workflow:<id>          string: JSON tasks.WorkflowMeta of a
//	                                chain, group or chord
//	<prefix>:{<wf>}:graph           hash: the graph of a workflow of any
//	                                shape: state, nodes, done, name,
//	                                failed, error, outputs, created_at
//	<prefix>:{<wf>}:graph:nodes     hash: node key → JSON record: task id,
//	                                queue, message, deps, successors
//	<prefix>:{<wf>}:graph:wait      hash: node key → deps not yet succeeded
//	<prefix>:{<wf>}:graph:res       hash: node key → results (JSON) of a
//	                                node that succeeded
//	<prefix>:{<group>}:group        hash: uuids, count, trig, created_at
//	<prefix>:{<group>}:done         hash: member id → JSON TaskState
//	<prefix>:{<group>}:order        list: member ids in the order they first finished
//	<prefix>:cancelled              pub/sub channel: ids of the tasks
//	                                cancelled (cancel.lua)
//	<prefix>:claim:<name>           string: "<token> <lease end, ms> <0|1
//	                                taken over>" while a lease runs, or
//	                                "done"; it lives for the claim's keep
//	<prefix>:{<queue>}:handlers     hash: task name → until when (ms) a
//	                                worker alive has announced it
//	<prefix>:{<queue>}:names:<d>    set: the task names of the workers whose
//	                                names have digest d; :notify after it,
//	                                their wake-up list
//	<prefix>:{<queue>}:namekeys:<n> zset: the digests whose names include
//	                                n, by until when (ms) they were announced
//	<prefix>:{<queue>}:rerouted     set: names with rerouted tasks
//	<prefix>:{<queue>}:rerouted:<n> list: task ids rerouted to workers
//	                                that have task name n
//	<prefix>:{<queue>}:unique:<k>   string: the id of the task that holds
//	                                unique key k (tasks.UniqueKeyOf), for
//	                                at most its UniqueFor
//	<prefix>:{<queue>}:limit:<k>:run  set: the tasks holding a slot of
//	                                limit key k (tasks.Limit)
//	<prefix>:{<queue>}:limit:<k>:wait list: the tasks parked on k
//	<prefix>:{<queue>}:limit:<k>:tat  string: k's GCRA arrival time (ms)
//	<prefix>:{<queue>}:parked       zset: the tasks parked on the queue's
//	                                limit keys, by when they were parked (ms)
//	<prefix>:{<queue>}:stats:<h>    hash: the queue's counts in the hour
//	                                starting at h (unix s): field "<p>:p"
//	                                the tasks processed in the period
//	                                starting at p (unix s), "<p>:f" those
//	                                that failed (workers add them with
//	                                their heartbeat; monitor.go)
//	<prefix>:{<queue>}:stats:day:<d> hash: the queue's counts of the UTC
//	                                day d (yyyymmdd): "p" processed, "f"
//	                                failed; it expires HistoryDays after
//	                                the day
//	<prefix>:{workers}:alive        zset: worker ids by when their
//	                                heartbeat runs out (ms)
//	<prefix>:{workers}:info         hash: worker id → JSON WorkerInfo
//
// Aggregation (aggregate.go, lua/lib/aggregate.lua); g is a group,
// "<name>\n<key>", and a member's task hash also has group and joined
// (its join stamp: ms × 1000 plus a sequence number):
//
//	<prefix>:{<queue>}:agg:policies    hash: task name → "<till ms> <max
//	                                   size> <max delay ms> <grace ms>",
//	                                   the policy last announced and until
//	                                   when an announcement lives
//	<prefix>:{<queue>}:agg:groups      set: groups with waiting members
//	<prefix>:{<queue>}:agg:count       string: members waiting or in batches
//	<prefix>:{<queue>}:agg:group:<g>   zset: waiting member ids by join stamp
//	<prefix>:{<queue>}:agg:due:<n>     zset: keys of task name n's groups
//	                                   that will be due, by a time (ms) no
//	                                   later than their due time
//	                                   (lib/aggregate.lua)
//	<prefix>:{<queue>}:agg:batches:<n> zset: n's batch ids by lease end or
//	                                   retry time (ms)
//	<prefix>:{<queue>}:agg:batch:<id>  hash: name, key, msg (member ids,
//	                                   oldest first, JSON), lease,
//	                                   lease_exp, settled, failed,
//	                                   recovered, error, handed (the
//	                                   aggregate's message, once handed
//	                                   over to another slot)
//	<prefix>:{<queue>}:agg:notify:<n>  list: a wake-up token for an idle
//	                                   worker aggregating n (WaitDue) when
//	                                   a group or batch of n is due
//	<prefix>:{<queue>}:agg:sent:<id>   string: aggregate id, handed over
//	                                   from a batch of another queue's
//	                                   slot (Cluster), was published here
//	                                   (publish_handed.lua); no expiry
//	                                   until the batch is forgotten, then
//	                                   handedForgottenLife leases
type keys struct {
	prefix string
	cache  sync.Map // queue name → *queueKeys
}

// queueKeys are the keys of one queue.
type queueKeys struct {
	pending, lease, scheduled, retry, archived, completed, paused, notify, maintainer string
	// fwake is the channel that wakes the queue's maintainer when
	// something comes due before its plan (lib/due.lua).
	fwake string
	// adopted marks a shard that follows its queue's pause (shards.go).
	adopted string
	// rerouted is the set of task names with rerouted tasks (each name's
	// list is rerouted + ":" + name); handlers says until when a worker
	// alive has announced each name; names + a TaskNames key is the set of
	// names of the workers with that key, and namesNotify their wake-up
	// list; nameKeys + ":" + name is the set of the TaskNames keys that
	// include name (route.go).
	rerouted, handlers, names, nameKeys string
	// task is the prefix of the task hashes: task + id.
	task string
	// unique is the prefix of the unique keys: unique + tasks.UniqueKeyOf
	// holds the UUID of the task that holds the key (enqueue.lua).
	unique string
	// limit is the prefix of the limit keys: limit + Limit.Key is the
	// base of a key's run set, wait list and GCRA time (lib/limit.lua).
	limit string
	// parked holds the tasks parked on the queue's limit keys.
	parked string
	// stats is the prefix of the queue's hourly statistics hashes, and of
	// its day hashes (historyKey).
	stats string
	// agg is the prefix of the aggregation keys (lua/lib/aggregate.lua
	// finds it from task); aggPolicies, aggGroups and aggCount are three
	// of them.
	agg, aggPolicies, aggGroups, aggCount string
}

// groupKeys are the keys of one group.
type groupKeys struct {
	meta  string // the group hash
	done  string // final states of finished members
	order string // finished members, in the order they first finished
}

func (k *keys) queues() string { return k.prefix + ":queues" }

// shards is the record of the sharded queues' shards (shards.go).
func (k *keys) shards() string { return k.prefix + ":shards" }

// workersAlive and workersInfo are the worker registry (monitor.go).
func (k *keys) workersAlive() string { return k.prefix + ":{workers}:alive" }
func (k *keys) workersInfo() string  { return k.prefix + ":{workers}:info" }

func (k *keys) claim(name string) string { return k.prefix + ":claim:" + name }

// periodic is the record of the periodic entries the schedulers
// registered (claim.go).
func (k *keys) periodic() string { return k.prefix + ":periodic" }

// cancelled is the channel cancel.lua publishes the ids of the tasks
// cancelled on.
func (k *keys) cancelled() string { return k.prefix + ":cancelled" }

func (k *keys) state(taskUUID string) string { return k.prefix + ":state:" + taskUUID }

// workflow is the record of a chain, group or chord (JSON WorkflowMeta).
func (k *keys) workflow(workflowUUID string) string { return k.prefix + ":workflow:" + workflowUUID }

func (k *keys) queue(name string) *queueKeys {
	if qk, ok := k.cache.Load(name); ok {
		return qk.(*queueKeys)
	}
	base := k.prefix + ":{" + name + "}:"
	qk := &queueKeys{
		pending:    base + "pending",
		lease:      base + "lease",
		scheduled:  base + "scheduled",
		retry:      base + "retry",
		archived:   base + "archived",
		completed:  base + "completed",
		paused:     base + "paused",
		adopted:    base + "adopted",
		notify:     base + "notify",
		maintainer: base + "maintainer",
		fwake:      base + "fwake",
		rerouted:   base + "rerouted",
		handlers:   base + "handlers",
		names:      base + "names:",
		nameKeys:   base + "namekeys",
		task:       base + "t:",
		unique:     base + "unique:",
		limit:      base + "limit:",
		parked:     base + "parked",
		stats:      base + "stats:",
	}
	qk.agg = base + "agg:"
	qk.aggPolicies, qk.aggGroups, qk.aggCount = qk.agg+"policies", qk.agg+"groups", qk.agg+"count"
	k.cache.Store(name, qk)
	return qk
}

// levels is the zset of the levels of q's bands with tasks
// (lua/lib/band.lua).
func (qk *queueKeys) levels() string { return qk.pending + ":levels" }

// namesNotify is the wake-up list of the workers of the queue with names.
func (qk *queueKeys) namesNotify(names *store.TaskNames) string {
	return qk.names + names.Key() + ":notify"
}

// aggGroup is the zset of the waiting members of the group of name and key.
func (qk *queueKeys) aggGroup(name, key string) string {
	return qk.agg + "group:" + aggGroupID(name, key)
}

// aggNotify is the wake-up list of the queue's workers aggregating name.
func (qk *queueKeys) aggNotify(name string) string { return qk.agg + "notify:" + name }

// aggDue is the due index of name's groups.
func (qk *queueKeys) aggDue(name string) string { return qk.agg + "due:" + name }

// aggBatches is the zset of name's batches.
func (qk *queueKeys) aggBatches(name string) string { return qk.agg + "batches:" + name }

// aggBatch is the hash of batch id.
func (qk *queueKeys) aggBatch(id string) string { return qk.agg + "batch:" + id }

// aggSent is the marker that the aggregate id, handed over from a batch
// in another slot, was published to the queue (publish_handed.lua).
func (qk *queueKeys) aggSent(id string) string { return qk.agg + "sent:" + id }

// aggGroupID names the group of name and key in the aggregation keys.
func aggGroupID(name, key string) string { return name + "\n" + key }

func (k *keys) group(groupUUID string) groupKeys {
	base := k.prefix + ":{" + groupUUID + "}:"
	return groupKeys{meta: base + "group", done: base + "done", order: base + "order"}
}

// all returns the group's keys in the order the scripts take them.
func (g groupKeys) all() []string { return []string{g.meta, g.done, g.order} }

// graphKeys are the keys of a workflow's graph (graph.go).
type graphKeys struct {
	meta  string // the graph hash: state, nodes, done, name, failed, error, outputs, created_at
	nodes string // node key → its record (graphNode)
	wait  string // node key → how many of its deps have not succeeded
	res   string // node key → the results of a node that succeeded
}

func (k *keys) graph(workflowUUID string) graphKeys {
	base := k.prefix + ":{" + workflowUUID + "}:graph"
	return graphKeys{meta: base, nodes: base + ":nodes", wait: base + ":wait", res: base + ":res"}
}

// all returns the graph's keys in the order the scripts take them.
func (g graphKeys) all() []string { return []string{g.meta, g.nodes, g.wait, g.res} }

// ValidQueue reports why a queue name cannot be used, or nil.
func ValidQueue(name string) error {
	if name == "" {
		return store.ErrNoQueue
	}
	if _, shard := store.ShardOf(name); strings.Contains(name, "}") || strings.Contains(name, "{") && !shard {
		return fmt.Errorf("rdb: queue %q: names must not contain braces (they form the Redis Cluster hash tag)", name)
	}
	return nil
}

// validGroup reports why groupUUID cannot name a group's keys, or nil.
func validGroup(groupUUID string) error {
	if strings.ContainsAny(groupUUID, "{}") {
		return fmt.Errorf("rdb: group %q: UUID must not contain braces (they form the Redis Cluster hash tag)", groupUUID)
	}
	return nil
}
