package iface

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// TaskNames is the set of task names a worker has registered. A worker
// announces it (Broker.Announce) and fetches with it (Broker.Fetch), so
// that a task it does not have reaches a worker that does (Broker.Reroute).
// It is immutable; nil means "any name" (Fetch then takes no rerouted
// task).
type TaskNames struct {
	list []string
	set  map[string]struct{}
	key  string
}

// NewTaskNames returns the set of names.
func NewTaskNames(names []string) *TaskNames {
	list := slices.Clone(names)
	slices.Sort(list)
	list = slices.Compact(list)
	set := make(map[string]struct{}, len(list))
	h := sha256.New()
	for _, n := range list {
		set[n] = struct{}{}
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return &TaskNames{list: list, set: set, key: hex.EncodeToString(h.Sum(nil)[:12])}
}

// Has reports whether name is in the set.
func (n *TaskNames) Has(name string) bool {
	_, ok := n.set[name]
	return ok
}

// List returns the names, sorted. The caller must not change it.
func (n *TaskNames) List() []string { return n.list }

// Key is a digest of the names: equal sets have equal keys, so workers
// with the same tasks share what a broker keeps for them.
func (n *TaskNames) Key() string { return n.key }

// Equal reports whether n and o hold the same names.
func (n *TaskNames) Equal(o *TaskNames) bool {
	if n == nil || o == nil {
		return n == o
	}
	return n.key == o.key && slices.Equal(n.list, o.list)
}
