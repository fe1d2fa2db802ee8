package redisbroker

import (
	"fmt"
	"strings"
	"sync"
)

// keys builds every Redis key the broker uses. All keys of one queue share
// the hash tag {queue}, so each queue lives in one Redis Cluster slot and
// every script touches one slot.
//
//	<prefix>:queues                 set of queue names
//	<prefix>:{<queue>}:pending      list of task ids, head runs first
//	<prefix>:{<queue>}:lease        zset of active task ids by lease expiry (ms)
//	<prefix>:{<queue>}:scheduled    zset of task ids by ETA (ms)
//	<prefix>:{<queue>}:retry        zset of task ids by retry time (ms)
//	<prefix>:{<queue>}:archived     zset of dead letters by archive time (ms)
//	<prefix>:{<queue>}:completed    zset of completed task ids by expiry (ms)
//	<prefix>:{<queue>}:paused       exists while the queue is paused
//	<prefix>:{<queue>}:notify       list of wake-up tokens for idle workers
//	<prefix>:{<queue>}:t:<task id>  hash: msg, state, lease, retried,
//	                                recovered, error, failed_at, process_at
//	<prefix>:claim:<key>            string held while a Claim lasts
type keys struct {
	prefix string
	cache  sync.Map // queue name → *queueKeys
}

type queueKeys struct {
	pending, lease, scheduled, retry, archived, completed, paused, notify string
	// task is the prefix of the task hashes: task + id.
	task string
}

func (k *keys) queues() string { return k.prefix + ":queues" }

func (k *keys) claim(key string) string { return k.prefix + ":claim:" + key }

func (k *keys) queue(name string) *queueKeys {
	if qk, ok := k.cache.Load(name); ok {
		return qk.(*queueKeys)
	}
	base := k.prefix + ":{" + name + "}:"
	qk := &queueKeys{
		pending:   base + "pending",
		lease:     base + "lease",
		scheduled: base + "scheduled",
		retry:     base + "retry",
		archived:  base + "archived",
		completed: base + "completed",
		paused:    base + "paused",
		notify:    base + "notify",
		task:      base + "t:",
	}
	k.cache.Store(name, qk)
	return qk
}

// validQueue reports why a queue name cannot be used, or nil.
func validQueue(name string) error {
	if name == "" {
		return errNoQueue
	}
	if strings.ContainsAny(name, "{}") {
		return fmt.Errorf("redisbroker: queue %q: names must not contain braces (they form the Redis Cluster hash tag)", name)
	}
	return nil
}
