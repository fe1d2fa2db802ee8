package rdb

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
)

// BenchmarkSettleScript reports the Redis time of one run of
// ack_success.lua (redis-µs/op, from the server's command statistics, so
// the network and this process are not in it) and the commands it calls
// (calls/op, which the machine's load does not change) for the settles
// workflows are made of: a task with nothing to send, a chain's step (its
// next task handed over), a group's member and a node of a fan-in whose
// join it does not release. Each run settles a task of its own, set up
// before.
func BenchmarkSettleScript(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client(b)
	ctx := context.Background()
	k := &keys{prefix: "bench"}
	qk := k.queue("q")
	// A chain message of 5 steps to come, as a chain's step carries them.
	msg := `{"Name":"add","Args":[{"Name":"","Type":"int64","Value":1}]`
	for range 5 {
		msg += `,"OnSuccess":[{"UUID":"task_f7e2ebba-3421-45dc-8863-45dd1d847658","Name":"add","RoutingKey":"q","Args":[{"Name":"","Type":"int64","Value":1}]`
	}
	msg += strings.Repeat("}]", 5) + "}"
	state := []interface{}{"state", "SUCCESS", "name", "add", "results", `[{"Type":"int64","Value":2}]`, "error", "", "workflow", "chain_fd6a5a9e"}
	// base is the success of task id with nothing to send, taking the
	// next task of its queue.
	base := func(id string) *scriptCall {
		c := &scriptCall{
			keys: []string{qk.task + id, qk.lease, qk.completed, k.state(id), qk.pending, qk.paused, qk.notify},
			args: []interface{}{"0", id, "tok" + id, 0, 3600000, "", "2026-12-07T17:38:20Z", 0, 3600000, 2592000000, "0", 3, "0", len(state)},
		}
		c.args = append(c.args, state...)
		c.args = append(c.args, "", "", 0, qk.task, 30000, "taken"+id)
		return c
	}
	gk := k.graph("wf")
	cases := []struct {
		name string
		// setup queues, for n tasks t0 … t(n-1), what a case needs besides
		// the tasks' hashes.
		setup func(p goredis.Pipeliner, n int)
		call  func(id string) *scriptCall
	}{
		{name: "nothing to send", call: base},
		{name: "chain step", call: func(id string) *scriptCall {
			c := base(id)
			c.keys = slices.Insert(c.keys, 4, qk.pending, qk.scheduled, qk.archived, qk.notify, qk.task+"n"+id, k.state("n"+id))
			c.args = slices.Insert(c.args, len(c.args)-3, interface{}("n"+id), interface{}(msg), 0, "", "")
			return c
		}},
		{name: "group member", call: func(id string) *scriptCall {
			c := base(id)
			c.keys = slices.Insert(c.keys, 4, k.group("g").all()...)
			c.args[5] = `{"TaskUUID":"` + id + `","State":"SUCCESS","Results":[{"Type":"int64","Value":2}]}`
			c.args[7] = 1 << 30
			return c
		}},
		{
			name: "a node of a fan-in",
			// A parent that waits for more children than are settled.
			setup: func(p goredis.Pipeliner, n int) {
				queueKeys, _ := json.Marshal([]string{qk.pending, qk.scheduled, qk.archived, qk.notify, qk.task})
				p.HSet(ctx, gk.meta, "state", "PENDING", "nodes", n+2, "done", 0, "sp", k.state(""), "q:q", string(queueKeys))
				p.HSet(ctx, gk.nodes, "p", `{"u":"parent","n":"sum","q":"q","m":"{\"Name\":\"sum\"}"}`)
				p.HSet(ctx, gk.wait, "p", n+1)
				p.HSet(ctx, gk.res, "", "")
				for i := range n {
					id := "t" + strconv.Itoa(i)
					p.HSet(ctx, gk.nodes, "n"+id, `{"u":"`+id+`","n":"add","q":"q","m":"{\"Name\":\"add\"}","s":["p"]}`)
				}
				for _, key := range gk.all() {
					p.PExpire(ctx, key, time.Hour)
				}
			},
			call: func(id string) *scriptCall {
				c := base(id)
				c.keys = slices.Insert(c.keys, 4, gk.all()...)
				m := len(state)
				c.args[14+m], c.args[15+m], c.args[16+m] = "n"+id, `[{"Type":"int64","Value":2}]`, 2592000000
				return c
			},
		},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			if err := client.FlushAll(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			if err := ackSuccessScript.Load(ctx, client).Err(); err != nil {
				b.Fatal(err)
			}
			far := time.Now().Add(time.Hour).UnixMilli()
			// The tasks are set up first, then settled one after another,
			// and the statistics read once.
			n := b.N
			p := client.Pipeline()
			for i := range n {
				id := "t" + strconv.Itoa(i)
				p.HSet(ctx, qk.task+id, "msg", msg, "state", "active", "lease", "tok"+id, "lease_exp", far, "at", 1000, "pub", "p")
				p.ZAdd(ctx, qk.lease, goredis.Z{Score: float64(far), Member: id})
			}
			if tc.setup != nil {
				tc.setup(p, n)
			}
			p.ConfigResetStat(ctx)
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range n {
				c := tc.call("t" + strconv.Itoa(i))
				v, err := ackSuccessScript.EvalSha(ctx, client, c.keys, c.args...).Result()
				if err != nil {
					b.Fatal(err)
				}
				if r, ok := v.([]interface{}); !ok || r[0] != int64(0) {
					b.Fatalf("settle %d: %v, want it done", i, v)
				}
			}
			b.StopTimer()
			usec, calls, inner := evalshaStat(b, client)
			b.ReportMetric(usec/calls, "redis-µs/op")
			b.ReportMetric(inner/calls, "calls/op")
		})
	}
}

// evalshaStat returns the usec and calls of EVALSHA in the server's
// command statistics, and the calls of the commands the scripts called
// (every other command but CONFIG and INFO).
func evalshaStat(b *testing.B, client *goredis.Client) (usec, calls, inner float64) {
	info, err := client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		cmd, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":")
		if !ok || strings.HasPrefix(cmd, "config") || cmd == "info" {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			name, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch {
			case name == "usec" && cmd == "evalsha":
				usec = x
			case name == "calls" && cmd == "evalsha":
				calls = x
			case name == "calls":
				inner += x
			}
		}
	}
	if calls == 0 {
		b.Fatal("no EVALSHA in the command statistics")
	}
	return usec, calls, inner
}

// BenchmarkEnqueueScript reports the Redis time of enqueue.lua per task
// (redis-µs/task) for publishes of 1000 tasks due now whose ids their
// sender made, as a group's or a workflow's send writes them.
func BenchmarkEnqueueScript(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client(b)
	ctx := context.Background()
	k := &keys{prefix: "bench"}
	qk := k.queue("q")
	const batch = 1000
	if err := enqueueScript.Load(ctx, client).Err(); err != nil {
		b.Fatal(err)
	}
	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	msg := `{"Name":"add","Args":[{"Name":"","Type":"int64","Value":1},{"Name":"","Type":"int64","Value":1}],"GroupUUID":"group_1","GroupTaskCount":1000}`
	n := 0
	for b.Loop() {
		keys := []string{qk.pending, qk.scheduled, qk.archived, qk.notify}
		args := []interface{}{qk.task, "1", time.Now().UnixMilli(), "tok" + strconv.Itoa(n), "f", batch}
		for range batch {
			id := "t" + strconv.Itoa(n)
			n++
			keys = append(keys, k.state(id))
			args = append(args, id, msg, 0, "", "", "", "")
		}
		v, err := enqueueScript.EvalSha(ctx, client, keys, args...).Result()
		if err != nil {
			b.Fatal(err)
		}
		if r, ok := v.([]interface{}); !ok || len(r) != 1 || r[0].([]interface{})[0] != int64(0) {
			b.Fatalf("publish: %v, want it done", v)
		}
	}
	usec, _, inner := evalshaStat(b, client)
	b.ReportMetric(usec/float64(n), "redis-µs/task")
	b.ReportMetric(inner/float64(n), "calls/task")
}
