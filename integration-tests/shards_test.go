package integration_test

import (
	"reflect"
	"testing"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
)

// redisPairs are the pairs of a server and of a cluster: where queues
// have shards.
func redisPairs() []pair {
	var out []pair
	for _, p := range pairs() {
		if p.name == "redis" || p.name == "cluster" {
			out = append(out, p)
		}
	}
	return out
}

// With the default queue in three shards, tasks, chains and chords run as
// they do on one queue, on a server and on a cluster of three masters.
func TestShardedDefaultQueue(t *testing.T) {
	forPairs(t, redisPairs(), func(t *testing.T, p pair) {
		e := newEnv(t, p, func(c *config.Config) {
			c.Redis.QueueShards = map[string]int{config.DefaultQueueName: 3}
		})
		ctx := e.ctx()
		shards := map[string]bool{}
		for i := int64(0); i < 30; i++ {
			s := sig("add", int64Arg(i), int64Arg(1))
			res, err := e.server.SendTaskWithContext(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if brokers.LogicalQueue(s.RoutingKey) != config.DefaultQueueName {
				t.Fatalf("task sent to %s", s.RoutingKey)
			}
			shards[s.RoutingKey] = true
			out, err := res.GetWithContext(ctx, poll)
			if err != nil {
				t.Fatal(err)
			}
			if got := values(out); !reflect.DeepEqual(got, []interface{}{i + 1}) {
				t.Fatalf("add(%d, 1) = %v", i, got)
			}
		}
		if len(shards) != 3 {
			t.Fatalf("30 tasks went to %v, want the three shards", shards)
		}

		out, err := e.runChain(sig("add", int64Arg(1), int64Arg(1)), sig("add", int64Arg(2)), sig("add", int64Arg(3)), sig("add", int64Arg(4)))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(out, []interface{}{int64(11)}) {
			t.Fatalf("chain result %v, want 11", out)
		}

		e.runChordOf20(t)
	})
}
