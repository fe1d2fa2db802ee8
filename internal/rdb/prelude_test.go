package rdb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/lua"
	"github.com/b6192125/machinist/internal/redistest"
)

// splitPrelude returns the prelude of script name (above lua.Mark) and the
// script without it, with its lib: the general path alone.
func splitPrelude(t *testing.T, name string) (prelude string, general *goredis.Script) {
	t.Helper()
	src, err := lua.Source(name)
	if err != nil {
		t.Fatal(err)
	}
	prelude, body, ok := strings.Cut(src, lua.Mark)
	if !ok {
		t.Fatalf("%s.lua has no prelude", name)
	}
	return prelude, goredis.NewScript(lua.WithLib(body))
}

// clockReading: a number above it (ms since the epoch, 2001 on) is a
// clock reading, one above joinStamp a join stamp (lib/aggregate.lua: ms
// times 1000 plus a sequence).
const (
	clockReading = 1e12
	joinStamp    = 1e15
)

// reading returns v, a value or score a script wrote, with a clock reading
// in it as its distance from start (ms) in whole seconds: two runs of one
// case, a few ms apart, read alike. With start 0 (a frozen clock:
// holdPreludeToLibAt) v is returned as it is, to the ms.
func reading(v string, start int64) string {
	n, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || n <= clockReading || start == 0:
		return v
	case n > joinStamp:
		stamp := int64(n)
		return fmt.Sprintf("stamp(%+ds, %d)", (stamp/1000-start+500)/1000, stamp%1000)
	default:
		return fmt.Sprintf("clock(%+ds)", (int64(n)-start+500)/1000)
	}
}

// keysSnapshot returns what the keys under prefix hold, by name without
// the prefix (and prefix left out of what they hold): a string's value, a
// list's items, a set's sorted members, a zset's members with their
// scores in order, a hash's fields, and its TTL in whole seconds (-1 for
// none); a clock reading as its distance from start (reading).
func keysSnapshot(t *testing.T, client *goredis.Client, prefix string, start int64) map[string]string {
	t.Helper()
	ctx := context.Background()
	names, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	snap := make(map[string]string, len(names))
	for _, key := range names {
		var v interface{}
		switch typ := client.Type(ctx, key).Val(); typ {
		case "string":
			v = reading(client.Get(ctx, key).Val(), start)
		case "list":
			v = client.LRange(ctx, key, 0, -1).Val()
		case "set":
			m := client.SMembers(ctx, key).Val()
			slices.Sort(m)
			v = m
		case "zset":
			var z []string
			for _, m := range client.ZRangeWithScores(ctx, key, 0, -1).Val() {
				z = append(z, fmt.Sprintf("%v=%s", m.Member, reading(strconv.FormatFloat(m.Score, 'f', -1, 64), start)))
			}
			v = z
		case "hash":
			h := client.HGetAll(ctx, key).Val()
			for f, fv := range h {
				h[f] = reading(fv, start)
			}
			v = h
		default:
			t.Fatalf("key %s: type %s", key, typ)
		}
		held := strings.ReplaceAll(fmt.Sprintf("%v", v), prefix, "")
		ttl := client.PTTL(ctx, key).Val()
		snap[strings.TrimPrefix(key, prefix)] = fmt.Sprintf("%s ttl:%ds", held, (ttl.Milliseconds()+500)/1000)
	}
	return snap
}

// scriptCall is a script's keys and arguments.
type scriptCall struct {
	keys []string
	args []interface{}
}

// preludeCase is one call of a script with a prelude: setup writes what
// the call finds, under the keys of a new prefix; call returns the call;
// answers says whether the prelude alone answers it.
type preludeCase struct {
	name    string
	setup   func(k *keys, qk *queueKeys)
	call    func(k *keys, qk *queueKeys) *scriptCall
	answers bool
}

// holdPreludeToLib runs each case with script name whole (full), with its
// general path alone (the script without its prelude) and with its prelude
// alone, each under a new prefix, and checks that the whole script and the
// general path reply and write alike, and publish a notice on channel
// (of the case's keys) the same notices; that the prelude alone answers as the case
// says, then as the general path does; and that where it does not answer
// it has written and published nothing. A clock reading in a reply is
// taken as its distance from the call (reading).
func holdPreludeToLib(t *testing.T, srv *redistest.Server, name string, full *goredis.Script, channel func(k *keys) string, cases []preludeCase) {
	holdPreludeToLibAt(t, srv, name, full, channel, cases, 0)
}

// holdPreludeToLibAt is holdPreludeToLib with, when at is not 0, the
// server's clock frozen at at (ms) in all three scripts (each TIME they
// call reads it; full is then built from the source), and what they write
// compared to the ms: a join in the same ms as the newest member's, a
// policy that ends now and a due time off by a ms are told apart.
func holdPreludeToLibAt(t *testing.T, srv *redistest.Server, name string, full *goredis.Script, channel func(k *keys) string, cases []preludeCase, at int64) {
	client := srv.Client(t)
	ctx := context.Background()
	prelude, general := splitPrelude(t, name)
	alone := goredis.NewScript(prelude + "return false\n")
	if at != 0 {
		freeze := func(src string) string {
			frozen := strings.ReplaceAll(src, `redis.call("TIME")`, fmt.Sprintf(`{"%d", "%d"}`, at/1000, at%1000*1000))
			if frozen == src {
				t.Fatalf("%s.lua: the clock is not frozen", name)
			}
			return frozen
		}
		src, err := lua.Source(name)
		if err != nil {
			t.Fatal(err)
		}
		_, body, _ := strings.Cut(src, lua.Mark)
		full = goredis.NewScript(freeze(lua.WithLib(src)))
		general = goredis.NewScript(freeze(lua.WithLib(body)))
		alone = goredis.NewScript(freeze(prelude) + "return false\n")
	}
	type outcome struct {
		reply         interface{}
		before, after map[string]string
		notices       string // published on channel, quoted
	}
	run := func(t *testing.T, c preludeCase, script *goredis.Script) (o outcome) {
		prefix := srv.Prefix(t)
		k := &keys{prefix: strings.TrimSuffix(prefix, ":")}
		qk := k.queue("q")
		if c.setup != nil {
			c.setup(k, qk)
		}
		call := c.call(k, qk)
		// A notice the script publishes comes before the one published
		// after it, on one subscription.
		ps := client.Subscribe(ctx, channel(k))
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now().UnixMilli()
		if at != 0 {
			start = 0
		}
		o.before = keysSnapshot(t, client, prefix, start)
		v, err := script.Run(ctx, client, call.keys, call.args...).Result()
		if err := client.Publish(ctx, channel(k), "after").Err(); err != nil {
			t.Fatal(err)
		}
		var notices []string
		for {
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if msg.Payload == "after" {
				break
			}
			notices = append(notices, strconv.Quote(msg.Payload))
		}
		o.notices = fmt.Sprint(notices)
		o.after = keysSnapshot(t, client, prefix, start)
		o.reply = err
		if err == nil {
			o.reply = readings(v, start)
		}
		return o
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			all, gen := run(t, c, full), run(t, c, general)
			if !reflect.DeepEqual(all.reply, gen.reply) {
				t.Errorf("reply %v, the general path's %v", all.reply, gen.reply)
			}
			if !reflect.DeepEqual(all.after, gen.after) {
				t.Errorf("keys after\n%v\nafter the general path\n%v", all.after, gen.after)
			}
			if all.notices != gen.notices {
				t.Errorf("published %s, the general path %s", all.notices, gen.notices)
			}
			pre := run(t, c, alone)
			err, _ := pre.reply.(error)
			if answered := err == nil; answered != c.answers {
				t.Fatalf("the prelude alone answered %v (%v), want %v", answered, pre.reply, c.answers)
			}
			if c.answers {
				if !reflect.DeepEqual(pre.reply, gen.reply) || pre.notices != gen.notices {
					t.Errorf("the prelude alone answered %v (published %s), the general path %v (%s)", pre.reply, pre.notices, gen.reply, gen.notices)
				}
				return
			}
			if !errors.Is(err, goredis.Nil) {
				t.Fatalf("the prelude alone: %v, want it to fall through", err)
			}
			if !reflect.DeepEqual(pre.before, pre.after) || pre.notices != "[]" {
				t.Errorf("the prelude alone, falling through, wrote (published %s):\nbefore %v\nafter %v", pre.notices, pre.before, pre.after)
			}
		})
	}
}

// readings returns v, a script's reply, with its integers that are clock
// readings as their distance from start (reading).
func readings(v interface{}, start int64) interface{} {
	switch v := v.(type) {
	case []interface{}:
		out := make([]interface{}, len(v))
		for i, e := range v {
			out[i] = readings(e, start)
		}
		return out
	case int64:
		if v > clockReading {
			return reading(strconv.FormatInt(v, 10), start)
		}
	}
	return v
}

// TestEnqueuePreludeWritesWhatTheLibWrites: enqueue.lua's prelude (one
// made task due now, with no unique key or limit, alone in its call: a
// plain task or an aggregation member) writes and answers what the
// general path (lib/queue.lua's put and wake; lib/aggregate.lua's
// agg_policy, agg_join and agg_file_new) writes and answers for the same
// call, case by case; a case that is not its own it leaves to the general
// path having written nothing.
func TestEnqueuePreludeWritesWhatTheLibWrites(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	const group = testGroup
	now := time.Now().UnixMilli()
	// policy announces task m's aggregation policy for an hour (from the
	// test's start: every run of a case announces the same).
	policy := func(rule string) func(k *keys, qk *queueKeys) {
		return announced(t, client, now+time.Hour.Milliseconds(), rule)
	}
	send := func(flag string, eta int64, g, unique, limit string) func(k *keys, qk *queueKeys) *scriptCall {
		return sendOne(now, flag, eta, g, unique, limit)
	}
	with := allOf
	// joined adds member id to the group, joined ms after the test's start.
	joined := func(id string, ms int64) func(k *keys, qk *queueKeys) { return joinedAt(t, client, id, (now+ms)*1000) }
	hour := time.Hour.Milliseconds()
	// plan is the queue's maintainer planning its next run ms after the
	// test's start (lib/due.lua), the plan kept a minute.
	plan := func(ms int64) func(k *keys, qk *queueKeys) {
		return func(k *keys, qk *queueKeys) {
			if err := client.Set(context.Background(), strings.TrimSuffix(qk.fwake, "fwake")+"fnext", now+ms, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The server's clock is frozen at the test's start, the clock the
	// sends carry: what a case writes is the same to the ms in every run,
	// however long the test takes.
	holdPreludeToLibAt(t, srv, "enqueue", nil, func(k *keys) string { return k.queue("q").fwake }, []preludeCase{
		{name: "a task", answers: true, call: send("f", 0, "", "", "")},
		{name: "a task, a wake-up token left", answers: true, call: send("f", 0, "", "", ""), setup: func(k *keys, qk *queueKeys) {
			client.LPush(context.Background(), qk.notify, "1")
		}},
		{name: "a task whose id its sender did not make", call: send("0", 0, "", "", "")},
		{name: "a made task its publish's run sent again queued", call: send("f", 0, "", "", ""), setup: func(k *keys, qk *queueKeys) {
			client.HSet(context.Background(), qk.task+"d", "msg", `{"Name":"m"}`, "state", "pending", "pub", "tok", "at", now)
			client.RPush(context.Background(), qk.pending, "d")
		}},
		{name: "a made task its publish's run sent again queued, run since", call: send("f", 0, "", "", ""), setup: func(k *keys, qk *queueKeys) {
			client.HSet(context.Background(), k.state("d"), "state", "SUCCESS", "pub", "tok")
		}},
		{name: "a made task whose state was written before", answers: true, call: statesBefore(send("f", 0, "", "", "")), setup: func(k *keys, qk *queueKeys) {
			client.HSet(context.Background(), k.state("d"), "state", "PENDING")
		}},
		{name: "a made task whose state was written before, run since", call: statesBefore(send("f", 0, "", "", "")), setup: func(k *keys, qk *queueKeys) {
			client.HSet(context.Background(), k.state("d"), "state", "SUCCESS")
		}},
		{name: "a made task, no state key", answers: true, call: func(k *keys, qk *queueKeys) *scriptCall {
			c := send("f", 0, "", "", "")(k, qk)
			c.keys = c.keys[:4]
			return c
		}},
		{name: "a made task, no state key, its hash there", call: func(k *keys, qk *queueKeys) *scriptCall {
			c := send("f", 0, "", "", "")(k, qk)
			c.keys = c.keys[:4]
			return c
		}, setup: func(k *keys, qk *queueKeys) {
			client.HSet(context.Background(), qk.task+"d", "msg", `{"Name":"m"}`, "state", "active", "pub", "tok", "at", now)
		}},
		{name: "a task sent again", call: send("1", 0, "", "", "")},
		{name: "a task with an ETA", call: send("f", time.Now().UnixMilli()+hour, "", "", "")},
		{name: "a unique task", call: send("f", 0, "", "60000 - u", "")},
		{name: "a limited task", call: send("f", 0, "", "", "1 0 0 l")},
		{name: "a task with a band", call: func(k *keys, qk *queueKeys) *scriptCall {
			c := send("f", 0, "", "", "")(k, qk)
			c.args[len(c.args)-1] = "3:acme"
			return c
		}},
		{name: "the first member", answers: true, call: send("f", 0, group, "", ""), setup: policy("100 5000 1000")},
		{name: "the first member, no grace", answers: true, call: send("f", 0, group, "", ""), setup: policy("100 5000 0")},
		{name: "the first member, no delay", answers: true, call: send("f", 0, group, "", ""), setup: policy("100 0 1000")},
		{name: "the first member, size only", answers: true, call: send("f", 0, group, "", ""), setup: policy("100 0 0")},
		{name: "the first member fills the group", answers: true, call: send("f", 0, group, "", ""), setup: policy("1 5000 1000")},
		{name: "the first member, the maintainer woken", answers: true, call: send("f", 0, group, "", ""), setup: with(policy("100 5000 1000"), plan(hour))},
		{name: "the first member, the maintainer due sooner", answers: true, call: send("f", 0, group, "", ""), setup: with(policy("100 5000 1000"), plan(10))},
		{name: "the first member fills the group, a plan", answers: true, call: send("f", 0, group, "", ""), setup: with(policy("1 5000 1000"), plan(hour))},
		{name: "a member", answers: true, call: send("f", 0, group, "", ""), setup: with(policy("100 5000 1000"), joined("x", -10))},
		{name: "a member after one stamped later", answers: true, call: send("f", 0, group, "", ""), setup: with(policy("100 5000 1000"), joined("x", 10000))},
		{name: "a member fills the group", answers: true, call: send("f", 0, group, "", ""), setup: with(policy("2 5000 1000"), joined("x", -10))},
		{name: "a member fills the group, a worker woken", answers: true, call: send("f", 0, group, "", ""), setup: with(policy("2 5000 1000"), joined("x", -10), func(k *keys, qk *queueKeys) {
			client.LPush(context.Background(), qk.agg+"notify:m", "1")
		})},
		{name: "a member fills a group filed sooner", answers: true, call: send("f", 0, group, "", ""), setup: with(policy("2 5000 1000"), joined("x", -10), func(k *keys, qk *queueKeys) {
			client.ZAdd(context.Background(), qk.agg+"due:m", goredis.Z{Score: float64(now - 60000), Member: "k"})
		})},
		{name: "a member, no policy", answers: true, call: send("f", 0, group, "", "")},
		{name: "a member, the policy expired", answers: true, call: send("f", 0, group, "", ""), setup: func(k *keys, qk *queueKeys) {
			client.HSet(context.Background(), qk.aggPolicies, "m", "1000 100 0 0")
		}},
		{name: "a member whose id its sender did not make", call: send("0", 0, group, "", ""), setup: policy("100 5000 1000")},
		{name: "a made member whose id another publish joined", call: send("f", 0, group, "", ""), setup: with(policy("100 5000 1000"), joined("d", -10))},
		{name: "a member with an ETA", call: send("f", time.Now().UnixMilli()+hour, group, "", ""), setup: policy("100 5000 1000")},
		{name: "a unique member", call: send("f", 0, group, "60000 - u", ""), setup: policy("100 5000 1000")},
		{name: "the first member, no MaxSize", answers: true, call: send("f", 0, group, "", ""), setup: policy("0 5000 1000")},
		{name: "a member after two, the newest stamped later", answers: true, call: send("f", 0, group, "", ""), setup: with(policy("100 5000 1000"), joined("x", -10), joined("y", 10000))},
		{name: "a task with no publish token", call: func(k *keys, qk *queueKeys) *scriptCall {
			c := send("f", 0, "", "", "")(k, qk)
			c.args[3] = ""
			return c
		}},
		{name: "a member with no publish token", setup: policy("100 5000 1000"), call: func(k *keys, qk *queueKeys) *scriptCall {
			c := send("f", 0, group, "", "")(k, qk)
			c.args[3] = ""
			return c
		}},
	}, now)
}

// TestAckSuccessPreludeWritesWhatTheLibWrites: ack_success.lua's prelude
// (the success of a plain task acknowledged at once, with a take) writes
// and answers what the general path (lib/fence.lua's check_settle,
// lib/state.lua's write_state and notify_final, lib/forget.lua's forget
// and lib/queue.lua's take_tasks) writes and answers for the same call,
// case by case; a case that is not its own it leaves to the general path
// having written nothing.
func TestAckSuccessPreludeWritesWhatTheLibWrites(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// held: task a leased (token tok), b and c pending, then more.
	held := func(more ...func(k *keys, qk *queueKeys)) func(k *keys, qk *queueKeys) {
		return func(k *keys, qk *queueKeys) {
			far := time.Now().Add(time.Hour).UnixMilli()
			must(client.HSet(ctx, qk.task+"a", "msg", `{"Name":"n"}`, "state", "active", "lease", "tok", "lease_exp", far, "at", 1000, "pub", "p").Err())
			must(client.ZAdd(ctx, qk.lease, goredis.Z{Score: float64(far), Member: "a"}).Err())
			for _, id := range []string{"b", "c"} {
				must(client.HSet(ctx, qk.task+id, "msg", `{"Name":"n","Args":["`+id+`"]}`, "state", "pending", "at", 1000).Err())
				must(client.RPush(ctx, qk.pending, id).Err())
			}
			for _, m := range more {
				m(k, qk)
			}
		}
	}
	// ack is a's success with a take, then changed.
	ack := func(changes ...func(k *keys, qk *queueKeys, c *scriptCall)) func(k *keys, qk *queueKeys) *scriptCall {
		return func(k *keys, qk *queueKeys) *scriptCall {
			c := &scriptCall{
				keys: []string{qk.task + "a", qk.lease, qk.completed, k.state("a"), qk.pending, qk.paused, qk.notify},
				args: []interface{}{"0", "a", "tok", 0, 60000, "", "", 0, 70000, 80000, "0", 3, "0",
					4, "state", "SUCCESS", "name", "n", "", "", 0, qk.task, 30000, "taken"},
			}
			for _, change := range changes {
				change(k, qk, c)
			}
			return c
		}
	}
	// withNames makes the take one for a worker with task names (names
	// key "k"): five take keys.
	withNames := func(k *keys, qk *queueKeys, c *scriptCall) {
		c.keys = append(c.keys, qk.rerouted, qk.names+"k")
		c.args[11] = 5
	}
	again := func(k *keys, qk *queueKeys, c *scriptCall) { c.args[0] = "1" }
	// next sends task d to a's queue when a succeeds (a chain's next step).
	next := func(k *keys, qk *queueKeys, c *scriptCall) {
		c.keys = slices.Insert(c.keys, 4, qk.pending, qk.scheduled, qk.archived, qk.notify, qk.task+"d", k.state("d"))
		c.args = slices.Insert(c.args, len(c.args)-3, interface{}("d"), `{"Name":"n"}`, 0, "", "")
	}
	nonePending := func(k *keys, qk *queueKeys) { must(client.Del(ctx, qk.pending).Err()) }
	// node makes a node a of workflow wf's graph; graph(wait, done) records
	// the graph: a, whose successor p waits for wait deps, and two more
	// nodes, done of its 4 nodes finished.
	node := func(k *keys, qk *queueKeys, c *scriptCall) {
		c.keys = slices.Insert(c.keys, 4, k.graph("wf").all()...)
		c.args[18], c.args[19], c.args[20] = "a", `[{"Type":"int64","Value":2}]`, 90000
	}
	graph := func(wait, done int) func(k *keys, qk *queueKeys) {
		return func(k *keys, qk *queueKeys) {
			gk := k.graph("wf")
			queue := `["` + qk.pending + `","` + qk.scheduled + `","` + qk.archived + `","` + qk.notify + `","` + qk.task + `"]`
			must(client.HSet(ctx, gk.meta, "state", "PENDING", "nodes", 4, "done", done, "sp", k.state(""), "q:q", queue).Err())
			must(client.HSet(ctx, gk.nodes, "a", `{"u":"a","n":"n","q":"q","m":"{\"Name\":\"n\"}","s":["p"]}`,
				"p", `{"u":"p","n":"n","q":"q","m":"{\"Name\":\"n\"}","d":["a","x"]}`).Err())
			must(client.HSet(ctx, gk.wait, "p", wait).Err())
			must(client.HSet(ctx, gk.res, "", "").Err())
			for _, key := range gk.all() {
				must(client.PExpire(ctx, key, 80*time.Second).Err())
			}
		}
	}
	// member makes a a member of group g of 3 tasks; chord, of a chord's.
	member := func(k *keys, qk *queueKeys, c *scriptCall) {
		c.keys = slices.Insert(c.keys, 4, k.group("g").all()...)
		c.args[5] = `{"TaskUUID":"a","State":"SUCCESS"}`
		c.args[7] = 3
	}
	chord := func(k *keys, qk *queueKeys, c *scriptCall) { c.args[12] = "1" }
	// initGroup records group g as InitGroup does; finished(id, ttl), that
	// member id finished, the group's keys then living ttl.
	initGroup := func(k *keys, qk *queueKeys) {
		g := k.group("g")
		must(client.HSet(ctx, g.meta, "uuids", `["a","x","y"]`, "count", 3, "created_at", "2026-01-01T00:00:00Z").Err())
		must(client.PExpire(ctx, g.meta, 80*time.Second).Err())
	}
	finished := func(id string, ttl time.Duration) func(k *keys, qk *queueKeys) {
		return func(k *keys, qk *queueKeys) {
			g := k.group("g")
			must(client.HSet(ctx, g.done, id, `{"TaskUUID":"`+id+`","State":"SUCCESS"}`).Err())
			must(client.RPush(ctx, g.order, id).Err())
			for _, key := range g.all() {
				must(client.PExpire(ctx, key, ttl).Err())
			}
		}
	}
	holdPreludeToLib(t, srv, "ack_success", ackSuccessScript, func(k *keys) string { return k.state("a") }, []preludeCase{
		{name: "takes the next", answers: true, setup: held(), call: ack()},
		{name: "run again", answers: true, setup: held(), call: ack(again)},
		{name: "run again, settled by its first run", setup: held(func(k *keys, qk *queueKeys) {
			must(client.Del(ctx, qk.task+"a").Err())
		}), call: ack(again)},
		{name: "recovered", answers: true, setup: held(), call: ack(func(k *keys, qk *queueKeys, c *scriptCall) { c.args[10] = "1" })},
		{name: "nothing pending", answers: true, setup: held(func(k *keys, qk *queueKeys) {
			must(client.Del(ctx, qk.pending).Err())
		}), call: ack()},
		{name: "sent before implicit states", answers: true, setup: held(func(k *keys, qk *queueKeys) {
			must(client.HDel(ctx, qk.task+"a", "at", "pub").Err())
		}), call: ack()},
		{name: "names with nothing rerouted", answers: true, setup: held(), call: ack(withNames)},
		{name: "a task rerouted to the names", setup: held(func(k *keys, qk *queueKeys) {
			must(client.SAdd(ctx, qk.rerouted, "n").Err())
			must(client.SAdd(ctx, qk.names+"k", "n").Err())
			must(client.RPush(ctx, qk.rerouted+":n", "r").Err())
			must(client.HSet(ctx, qk.task+"r", "msg", `{"Name":"n"}`, "state", "pending", "rerouted", "n").Err())
		}), call: ack(withNames)},
		{name: "paused", setup: held(func(k *keys, qk *queueKeys) {
			must(client.Set(ctx, qk.paused, "1", 0).Err())
		}), call: ack()},
		{name: "the next is limited", setup: held(func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"b", "limit", "1 0 0 "+qk.limit+"k").Err())
		}), call: ack()},
		{name: "the next is limited and the only one", setup: held(func(k *keys, qk *queueKeys) {
			must(client.LRem(ctx, qk.pending, 1, "c").Err())
			must(client.HSet(ctx, qk.task+"b", "limit", "1 0 0 "+qk.limit+"k").Err())
		}), call: ack()},
		{name: "the only pending is gone", setup: held(func(k *keys, qk *queueKeys) {
			must(client.LRem(ctx, qk.pending, 1, "c").Err())
			must(client.Del(ctx, qk.task+"b").Err())
		}), call: ack()},
		{name: "the settled task's own id heads pending", setup: held(func(k *keys, qk *queueKeys) {
			must(client.LPush(ctx, qk.pending, "a").Err())
		}), call: ack()},
		{name: "the head of pending is taken already", setup: held(func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"x", "msg", `{"Name":"n"}`, "state", "active", "lease", "other", "lease_exp", time.Now().Add(time.Hour).UnixMilli()).Err())
			must(client.LPush(ctx, qk.pending, "x").Err())
		}), call: ack()},
		{name: "the head of pending is finished", setup: held(func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"x", "msg", `{"Name":"n"}`, "state", "completed", "settled", "other").Err())
			must(client.LPush(ctx, qk.pending, "x").Err())
		}), call: ack()},
		{name: "sent before pubs were kept", answers: true, setup: held(func(k *keys, qk *queueKeys) {
			must(client.HDel(ctx, qk.task+"a", "pub").Err())
		}), call: ack()},
		{name: "the next is gone", setup: held(func(k *keys, qk *queueKeys) {
			must(client.Del(ctx, qk.task+"b").Err())
		}), call: ack()},
		{name: "the next has an outcome and a limit", answers: true, setup: held(func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"b", "limit", "1 0 0 "+qk.limit+"k", "outcome", `{"State":"SUCCESS"}`).Err())
		}), call: ack()},
		{name: "the next was retried and recovered", answers: true, setup: held(func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"b", "retried", 2, "recovered", 1).Err())
		}), call: ack()},
		{name: "lease lost", setup: held(), call: ack(func(k *keys, qk *queueKeys, c *scriptCall) { c.args[2] = "stale" })},
		{name: "lease expired", setup: held(func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"a", "lease_exp", 1).Err())
		}), call: ack()},
		{name: "unique", setup: held(func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"a", "unique", qk.unique+"u").Err())
			must(client.Set(ctx, qk.unique+"u", "a", time.Hour).Err())
		}), call: ack()},
		{name: "limited", setup: held(func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"a", "limit", "1 0 0 "+qk.limit+"k").Err())
			must(client.SAdd(ctx, qk.limit+"k:run", "a").Err())
		}), call: ack()},
		{name: "completed retention", setup: held(), call: ack(func(k *keys, qk *queueKeys, c *scriptCall) { c.args[3] = 60000 })},
		{name: "no take", setup: held(), call: ack(func(k *keys, qk *queueKeys, c *scriptCall) {
			c.keys = c.keys[:4]
			c.args[11] = 0
			c.args = c.args[:len(c.args)-3]
		})},
		{name: "group member, the first to finish", answers: true, setup: held(), call: ack(member)},
		{name: "group member, the first to finish, nothing pending", answers: true, setup: held(nonePending), call: ack(member)},
		{name: "group member after InitGroup", answers: true, setup: held(initGroup), call: ack(member)},
		{name: "group member after another", answers: true, setup: held(initGroup, finished("x", time.Hour)), call: ack(member)},
		{name: "group member, the group's keys near their end", answers: true, setup: held(initGroup, finished("x", 10*time.Second)), call: ack(member)},
		{name: "group member, the group's keys with a minute less", answers: true, setup: held(initGroup, finished("x", time.Hour-2*time.Minute)), call: ack(member)},
		{name: "group member completing its group", answers: true, setup: held(initGroup, finished("x", time.Hour), finished("y", time.Hour)), call: ack(member)},
		{name: "group member run again", answers: true, setup: held(initGroup, finished("a", time.Hour)), call: ack(member, again)},
		{name: "chord member", answers: true, setup: held(initGroup), call: ack(member, chord)},
		{name: "chord member completing its group", answers: true, setup: held(initGroup, finished("x", time.Hour), finished("y", time.Hour)), call: ack(member, chord)},
		{name: "chord member completing its group, nothing pending", answers: true, setup: held(nonePending, initGroup, finished("x", time.Hour), finished("y", time.Hour)), call: ack(member, chord)},
		{name: "chord member run again", setup: held(initGroup, finished("x", time.Hour), finished("y", time.Hour)), call: ack(member, chord, again)},
		{name: "group member with a next task", setup: held(initGroup), call: ack(member, func(k *keys, qk *queueKeys, c *scriptCall) {
			c.keys = slices.Insert(c.keys, 7, qk.pending, qk.scheduled, qk.archived, qk.notify, qk.task+"d", k.state("d"))
			c.args = slices.Insert(c.args, len(c.args)-3, interface{}("d"), `{"Name":"n"}`, 0, "", "")
		})},
		{name: "a graph's node, its join waiting for another", answers: true, setup: held(graph(2, 0)), call: ack(node)},
		{name: "a graph's node, nothing pending", answers: true, setup: held(nonePending, graph(2, 0)), call: ack(node)},
		{name: "a graph's node, the graph's keys near their end", answers: true, setup: held(graph(2, 0), func(k *keys, qk *queueKeys) {
			for _, key := range k.graph("wf").all() {
				must(client.PExpire(ctx, key, 10*time.Second).Err())
			}
		}), call: ack(node)},
		{name: "a graph's node with no successor", answers: true, setup: held(graph(2, 0), func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, k.graph("wf").nodes, "a", `{"u":"a","n":"n","q":"q","m":"{\"Name\":\"n\"}"}`).Err())
		}), call: ack(node)},
		{name: "a graph's node releasing its join", setup: held(graph(1, 0)), call: ack(node)},
		{name: "a graph's node, the graph's next to last", answers: true, setup: held(graph(2, 2)), call: ack(node)},
		{name: "a graph's node completing its graph", setup: held(graph(2, 3)), call: ack(node)},
		{name: "a graph's node whose results are recorded", setup: held(graph(2, 0), func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, k.graph("wf").res, "a", "[]").Err())
		}), call: ack(node)},
		{name: "a graph's node of a failed graph", setup: held(graph(2, 0), func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, k.graph("wf").meta, "state", "FAILURE").Err())
		}), call: ack(node)},
		{name: "a graph's node of a graph gone", setup: held(), call: ack(node)},
		{name: "a graph's node whose successor's wait is missing", answers: true, setup: held(graph(2, 0), func(k *keys, qk *queueKeys) {
			must(client.HDel(ctx, k.graph("wf").wait, "p").Err())
		}), call: ack(node)},
		{name: "a graph's node naming its successor twice", setup: held(graph(2, 0), func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, k.graph("wf").nodes, "a", `{"u":"a","n":"n","q":"q","m":"{\"Name\":\"n\"}","s":["p","p"]}`).Err())
		}), call: ack(node)},
		{name: "a graph's node with 17 successors", setup: held(graph(2, 0), func(k *keys, qk *queueKeys) {
			succ := make([]string, 17)
			for i := range succ {
				succ[i] = `"p"`
			}
			must(client.HSet(ctx, k.graph("wf").nodes, "a", `{"u":"a","n":"n","q":"q","m":"{\"Name\":\"n\"}","s":[`+strings.Join(succ, ",")+`]}`).Err())
		}), call: ack(node)},
		{name: "a graph's node that is a group member", setup: held(graph(2, 0), initGroup), call: ack(node, func(k *keys, qk *queueKeys, c *scriptCall) {
			c.keys = slices.Insert(c.keys, 4, k.group("g").all()...)
			c.args[5] = `{"TaskUUID":"a","State":"SUCCESS"}`
			c.args[7] = 3
		})},
		{name: "group member, lease lost", setup: held(initGroup), call: ack(member, func(k *keys, qk *queueKeys, c *scriptCall) { c.args[2] = "stale" })},
		{name: "a next task", answers: true, setup: held(), call: ack(next)},
		{name: "a next task, the notify list woken", answers: true, setup: held(func(k *keys, qk *queueKeys) {
			must(client.RPush(ctx, qk.notify, "1").Err())
		}), call: ack(next)},
		{name: "a next task handed over", answers: true, setup: held(nonePending), call: ack(next)},
		{name: "a next task handed over, with names", answers: true, setup: held(nonePending), call: ack(next, withNames)},
		{name: "a next task handed over, run again", answers: true, setup: held(nonePending), call: ack(next, again)},
		{name: "a next task, a task rerouted to the names", setup: held(nonePending, func(k *keys, qk *queueKeys) {
			must(client.SAdd(ctx, qk.rerouted, "n").Err())
			must(client.SAdd(ctx, qk.names+"k", "n").Err())
			must(client.RPush(ctx, qk.rerouted+":n", "r").Err())
			must(client.HSet(ctx, qk.task+"r", "msg", `{"Name":"n"}`, "state", "pending", "rerouted", "n").Err())
		}), call: ack(next, withNames)},
		{name: "a next task handed over, its workflow's PENDING written", answers: true, setup: held(nonePending, func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, k.state("d"), "state", "PENDING", "name", "n").Err())
		}), call: ack(next)},
		{name: "a next task handed over, its ETA passed", answers: true, setup: held(nonePending), call: ack(next, func(k *keys, qk *queueKeys, c *scriptCall) {
			c.args[len(c.args)-6] = time.Now().Add(-time.Hour).UnixMilli()
		})},
		{name: "a next task with an ETA", setup: held(nonePending), call: ack(next, func(k *keys, qk *queueKeys, c *scriptCall) {
			c.args[len(c.args)-6] = time.Now().Add(time.Hour).UnixMilli()
		})},
		{name: "a next task with a limit", setup: held(nonePending), call: ack(next, func(k *keys, qk *queueKeys, c *scriptCall) {
			c.args[len(c.args)-5] = "1 0 0 " + qk.limit + "k"
		})},
		{name: "a next task with a band", setup: held(nonePending), call: ack(next, func(k *keys, qk *queueKeys, c *scriptCall) {
			c.args[len(c.args)-4] = "5"
		})},
		{name: "a next task whose id is pending", setup: held(nonePending, func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"d", "msg", `{"Name":"n"}`, "state", "pending", "at", 1000).Err())
			must(client.RPush(ctx, qk.pending, "d").Err())
		}), call: ack(next)},
		{name: "a next task whose id is archived", setup: held(nonePending, func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"d", "msg", `{"Name":"n"}`, "state", "archived", "error", "e").Err())
			must(client.ZAdd(ctx, qk.archived, goredis.Z{Score: 1000, Member: "d"}).Err())
		}), call: ack(next)},
		{name: "a next task to another queue", setup: held(nonePending), call: ack(func(k *keys, qk *queueKeys, c *scriptCall) {
			other := k.queue("other")
			c.keys = slices.Insert(c.keys, 4, other.pending, other.scheduled, other.archived, other.notify, other.task+"d", k.state("d"))
			c.args = slices.Insert(c.args, len(c.args)-3, interface{}("d"), `{"Name":"n"}`, 0, "", "")
		})},
		{name: "a next task after a recovery", setup: held(nonePending), call: ack(next, func(k *keys, qk *queueKeys, c *scriptCall) { c.args[10] = "1" })},
		{name: "a next task, lease lost", setup: held(nonePending), call: ack(next, func(k *keys, qk *queueKeys, c *scriptCall) { c.args[2] = "stale" })},
		{name: "a next task, the head of pending taken already", setup: held(func(k *keys, qk *queueKeys) {
			must(client.HSet(ctx, qk.task+"x", "msg", `{"Name":"n"}`, "state", "active", "lease", "other", "lease_exp", time.Now().Add(time.Hour).UnixMilli()).Err())
			must(client.LPush(ctx, qk.pending, "x").Err())
		}), call: ack(next)},
		{name: "two next tasks", setup: held(nonePending), call: ack(next, func(k *keys, qk *queueKeys, c *scriptCall) {
			c.keys = slices.Insert(c.keys, 10, qk.pending, qk.scheduled, qk.archived, qk.notify, qk.task+"e", k.state("e"))
			c.args = slices.Insert(c.args, len(c.args)-3, interface{}("e"), `{"Name":"n"}`, 0, "", "")
		})},
	})
}

// TestEnqueuePreludeAtAFrozenClock: enqueue.lua's prelude for a member
// writes what the general path writes to the ms, the server's clock frozen
// (holdPreludeToLibAt): a join in the ms of the newest member's stamp, a
// policy that ends now, due times.
func TestEnqueuePreludeAtAFrozenClock(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	at := time.Now().UnixMilli()
	policy := func(till int64, rule string) func(k *keys, qk *queueKeys) { return announced(t, client, till, rule) }
	joined := func(id string, stamp int64) func(k *keys, qk *queueKeys) { return joinedAt(t, client, id, stamp) }
	with := allOf
	send := sendOne(at, "f", 0, testGroup, "", "")
	hour := time.Hour.Milliseconds()
	holdPreludeToLibAt(t, srv, "enqueue", nil, func(k *keys) string { return k.state("d") }, []preludeCase{
		{name: "the first member", answers: true, call: send, setup: policy(at+hour, "100 5000 1000")},
		{name: "the first member, delay only", answers: true, call: send, setup: policy(at+hour, "100 5000 0")},
		{name: "the first member, grace only", answers: true, call: send, setup: policy(at+hour, "100 0 1000")},
		{name: "the policy ends now", answers: true, call: send, setup: policy(at, "100 5000 1000")},
		{name: "the policy ends in a ms", answers: true, call: send, setup: policy(at+1, "100 5000 1000")},
		{name: "a member in the ms of the newest", answers: true, call: send, setup: with(policy(at+hour, "100 5000 1000"), joined("x", at*1000))},
		{name: "a member a ms after the newest", answers: true, call: send, setup: with(policy(at+hour, "100 5000 1000"), joined("x", at*1000-1000))},
		{name: "a member fills the group", answers: true, call: send, setup: with(policy(at+hour, "2 5000 1000"), joined("x", at*1000-5))},
	}, at)
}

// statesBefore makes call one whose sender wrote its tasks' states
// before it (enqueue.lua's ARGV[2] "0").
func statesBefore(call func(k *keys, qk *queueKeys) *scriptCall) func(k *keys, qk *queueKeys) *scriptCall {
	return func(k *keys, qk *queueKeys) *scriptCall {
		c := call(k, qk)
		c.args[1] = "0"
		return c
	}
}

// testGroup is the aggregation group of the prelude tests: task m's key k.
const testGroup = "m\nk"

// allOf runs setups one after another.
func allOf(setups ...func(k *keys, qk *queueKeys)) func(k *keys, qk *queueKeys) {
	return func(k *keys, qk *queueKeys) {
		for _, s := range setups {
			s(k, qk)
		}
	}
}

// announced announces task m's aggregation policy rule ("<max size> <max
// delay ms> <grace ms>") until till (ms).
func announced(t *testing.T, c *goredis.Client, till int64, rule string) func(k *keys, qk *queueKeys) {
	return func(k *keys, qk *queueKeys) {
		if err := c.HSet(context.Background(), qk.aggPolicies, "m", fmt.Sprintf("%d %s", till, rule)).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// joinedAt adds member id to testGroup with join stamp stamp, as agg_join
// does.
func joinedAt(t *testing.T, c *goredis.Client, id string, stamp int64) func(k *keys, qk *queueKeys) {
	return func(k *keys, qk *queueKeys) {
		ctx := context.Background()
		pipe := c.TxPipeline()
		pipe.ZAdd(ctx, qk.agg+"group:"+testGroup, goredis.Z{Score: float64(stamp), Member: id})
		pipe.SAdd(ctx, qk.aggGroups, testGroup)
		pipe.HSet(ctx, qk.task+id, "state", "aggregating", "group", testGroup, "joined", stamp, "msg", `{"Name":"m"}`)
		pipe.IncrBy(ctx, qk.aggCount, 1)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// sendOne is an enqueue.lua call with one publish of one task d, sent at
// at (the sender's clock), with its flag, ETA, group, unique key and limit.
func sendOne(at int64, flag string, eta int64, g, unique, limit string) func(k *keys, qk *queueKeys) *scriptCall {
	return func(k *keys, qk *queueKeys) *scriptCall {
		return &scriptCall{
			keys: []string{qk.pending, qk.scheduled, qk.archived, qk.notify, k.state("d")},
			args: []interface{}{qk.task, "1", at, "tok", flag, 1, "d", `{"Name":"m"}`, eta, g, unique, limit, ""},
		}
	}
}
