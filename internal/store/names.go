package store

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// TaskNames is the set of task names a worker has registered. A worker
// announces it (Broker.Announce) and fetches with it (Broker.Fetch), so
// that a task it does not have reaches a worker that does (Broker.Reroute).
// It is immutable. A nil *TaskNames holds no name: Fetch then takes no
// rerouted task, and Announce announces none.
type TaskNames struct {
	list []string
	key  string
}

// NewTaskNames returns the set of names.
func NewTaskNames(names []string) *TaskNames {
	list := slices.Clone(names)
	slices.Sort(list)
	list = slices.Compact(list)
	h := sha256.New()
	for _, n := range list {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return &TaskNames{list: list, key: hex.EncodeToString(h.Sum(nil)[:12])}
}

// List returns the names, sorted (none for nil). The caller must not
// change it.
func (n *TaskNames) List() []string {
	if n == nil {
		return nil
	}
	return n.list
}

// Key is a digest of the names: equal sets have equal keys, so workers
// with the same tasks share what a broker keeps for them.
func (n *TaskNames) Key() string { return n.key }
