package redisbackend

import (
	"fmt"
	"strings"
)

// keys builds every Redis key the backend uses. A group's keys share the
// hash tag {groupUUID}, so they live in one Redis Cluster slot and one
// script can touch them all.
//
//	<prefix>:state:<taskUUID>       hash: state, name, results, error, created_at
//	<prefix>:{<groupUUID>}:group    hash: uuids, count, trig, created_at
//	<prefix>:{<groupUUID>}:done     hash: member UUID → JSON TaskState
//	<prefix>:{<groupUUID>}:order    list: member UUIDs in the order they first finished
type keys struct {
	prefix string
}

// groupKeys are the keys of one group.
type groupKeys struct {
	meta  string // the group hash
	done  string // final states of finished members
	order string // finished members, in the order they first finished
}

func (k keys) state(taskUUID string) string { return k.prefix + ":state:" + taskUUID }

func (k keys) group(groupUUID string) groupKeys {
	base := k.prefix + ":{" + groupUUID + "}:"
	return groupKeys{meta: base + "group", done: base + "done", order: base + "order"}
}

// all returns the group's keys in the order the scripts take them.
func (g groupKeys) all() []string { return []string{g.meta, g.done, g.order} }

// validGroup reports why groupUUID cannot name a group's keys, or nil.
func validGroup(groupUUID string) error {
	if strings.ContainsAny(groupUUID, "{}") {
		return fmt.Errorf("redisbackend: group %q: UUID must not contain braces (they form the Redis Cluster hash tag)", groupUUID)
	}
	return nil
}
