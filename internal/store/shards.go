package store

import "strings"

// ShardOf reports whether name is a shard of a queue, and of which: the
// Redis broker spreads a queue q with several shards
// (config.RedisConfig.QueueShards) over q and queues named q{k, k a
// positive integer. A queue name given by users holds no brace, so no
// other name reads as a shard.
func ShardOf(name string) (queue string, ok bool) {
	q, k, found := strings.Cut(name, "{")
	if !found || q == "" || k == "" || k[0] == '0' || len(k) > 9 {
		return "", false
	}
	for _, c := range k {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return q, true
}

// LogicalQueue is the queue that name is a shard of, or name itself: the
// queue users sent the task to, under which workers, metrics and
// statistics report it.
func LogicalQueue(name string) string {
	if q, ok := ShardOf(name); ok {
		return q
	}
	return name
}
