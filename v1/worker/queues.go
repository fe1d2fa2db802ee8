package worker

import (
	"math/rand/v2"
	"sort"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// queueOrder decides, for each fetch, the order in which the worker's
// queues are tried.
type queueOrder struct {
	names   []string
	weights []int
	strict  bool
}

// newQueueOrder orders queues by weight. Without weights every queue counts
// 1; with strict priority a queue is tried only when every queue of higher
// weight is empty.
func newQueueOrder(queues []string, weights []int, strict bool) *queueOrder {
	o := &queueOrder{names: append([]string(nil), queues...), strict: strict}
	o.weights = make([]int, len(queues))
	for i := range queues {
		o.weights[i] = 1
		if i < len(weights) && weights[i] > 0 {
			o.weights[i] = weights[i]
		}
	}
	if strict {
		idx := make([]int, len(o.names))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return o.weights[idx[a]] > o.weights[idx[b]] })
		names := make([]string, len(idx))
		for i, j := range idx {
			names[i] = o.names[j]
		}
		o.names = names
	}
	return o
}

// next returns the order for one fetch: the fixed priority order when
// strict, otherwise a random order in which each queue comes first with a
// probability proportional to its weight (and so on for the rest).
func (o *queueOrder) next() []string {
	if o.strict || len(o.names) == 1 {
		return o.names
	}
	names := append([]string(nil), o.names...)
	weights := append([]int(nil), o.weights...)
	out := make([]string, 0, len(names))
	for len(names) > 0 {
		total := 0
		for _, w := range weights {
			total += w
		}
		pick := rand.IntN(total)
		i := 0
		for ; pick >= weights[i]; i++ {
			pick -= weights[i]
		}
		out = append(out, names[i])
		names = append(names[:i], names[i+1:]...)
		weights = append(weights[:i], weights[i+1:]...)
	}
	return out
}

// first reports whether q is the queue every fetch tries first: the only
// queue, or the first by strict priority. A settle may take the next task
// of such a queue for the slot it frees (brokers.Relay) without changing
// which tasks the worker runs: a fetch would have tried it first. A shard
// of such a queue (brokers.ShardOf) counts as the queue: a fetch tries
// the queue's shards from one picked at random, so a relay that keeps a
// busy worker on the settled task's shard takes a task the fetch might
// have taken, and every shard still gets the fetches of idle slots.
func (o *queueOrder) first(q string) bool {
	return (o.strict || len(o.names) == 1) && o.names[0] == brokers.LogicalQueue(q)
}
