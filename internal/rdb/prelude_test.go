package rdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
)

// splitPrelude returns the prelude of script name (above libMark) and the
// script without it, with its lib: the general path alone.
func splitPrelude(t *testing.T, name string) (prelude string, general *goredis.Script) {
	t.Helper()
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		t.Fatal(err)
	}
	prelude, body, ok := strings.Cut(string(src), libMark)
	if !ok {
		t.Fatalf("%s.lua has no prelude", name)
	}
	return prelude, goredis.NewScript(withLib(body))
}

// clockReading: a number above it (ms since the epoch, 2001 on) is a
// clock reading.
const clockReading = 1e12

// keysSnapshot returns what the keys under prefix hold, by name without
// the prefix (and prefix left out of what they hold): a string's value, a
// list's items, a set's sorted members, a zset's members in order (not
// their scores: those the scripts write are clock readings), a hash's
// fields (a clock reading in lease_exp or at only marked as one), and
// whether the key has a TTL.
func keysSnapshot(t *testing.T, client *goredis.Client, prefix string) map[string]string {
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
			v = client.Get(ctx, key).Val()
		case "list":
			v = client.LRange(ctx, key, 0, -1).Val()
		case "set":
			m := client.SMembers(ctx, key).Val()
			slices.Sort(m)
			v = m
		case "zset":
			v = client.ZRange(ctx, key, 0, -1).Val()
		case "hash":
			h := client.HGetAll(ctx, key).Val()
			for _, f := range []string{"lease_exp", "at"} {
				if n, _ := strconv.ParseInt(h[f], 10, 64); n > clockReading {
					h[f] = "a clock reading"
				}
			}
			v = h
		default:
			t.Fatalf("key %s: type %s", key, typ)
		}
		held := strings.ReplaceAll(fmt.Sprintf("%v", v), prefix, "")
		snap[strings.TrimPrefix(key, prefix)] = fmt.Sprintf("%s ttl:%v", held, client.PTTL(ctx, key).Val() > 0)
	}
	return snap
}

// TestEnqueuePreludeWritesWhatPutWrites: enqueue.lua's prelude (a made
// task due now, alone in its call) writes the task hash, the pending list
// and the wake-up token as the general path (lib/queue.lua's put and
// wake) writes them for the same task.
func TestEnqueuePreludeWritesWhatPutWrites(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	ctx := context.Background()
	qk := (&keys{prefix: strings.TrimSuffix(srv.Prefix(t), ":")}).queue("q")
	queueKeys := []string{qk.pending, qk.scheduled, qk.archived, qk.notify}
	hashes := make(map[string]map[string]string)
	for _, c := range []struct{ id, flag string }{{"fast", "f"}, {"general", "0"}} {
		if err := client.Del(ctx, qk.notify).Err(); err != nil {
			t.Fatal(err)
		}
		v, err := enqueueScript.Run(ctx, client, append(queueKeys, qk.task+"state-"+c.id), qk.task, "1", "1000",
			"tok", c.flag, 1, c.id, `{"Name":"n"}`, 0, "", "", "").Result()
		if err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		if code, id, _, err := parseEnqueueReply(onlyReply(t, v)); err != nil || code != statusOK {
			t.Fatalf("%s: %d %s, %v", c.id, code, id, err)
		}
		hashes[c.id] = client.HGetAll(ctx, qk.task+c.id).Val()
		if n := client.LLen(ctx, qk.notify).Val(); n != 1 {
			t.Fatalf("%s: %d wake-up tokens, want 1", c.id, n)
		}
	}
	if !maps.Equal(hashes["fast"], hashes["general"]) {
		t.Fatalf("task hash by the prelude %v, by put %v", hashes["fast"], hashes["general"])
	}
	if got := client.LRange(ctx, qk.pending, 0, -1).Val(); !slices.Equal(got, []string{"fast", "general"}) {
		t.Fatalf("pending %v, want [fast general]", got)
	}
	// The prelude alone answers the made call, and leaves the other to the
	// general path.
	prelude, _ := splitPrelude(t, "enqueue")
	alone := goredis.NewScript(prelude + "return false\n")
	for _, c := range []struct {
		id, flag string
		answers  bool
	}{{"fast2", "f", true}, {"general2", "0", false}} {
		err := alone.Run(ctx, client, append(queueKeys, qk.task+"state-"+c.id), qk.task, "1", "1000",
			"tok", c.flag, 1, c.id, `{"Name":"n"}`, 0, "", "", "").Err()
		if answered := err == nil; answered != c.answers {
			t.Errorf("prelude alone, flag %q: answered %v (%v), want %v", c.flag, answered, err, c.answers)
		}
	}
}

// TestAckSuccessPreludeWritesWhatTheLibWrites: ack_success.lua's prelude
// (the success of a plain task acknowledged at once, with a take) writes
// and answers, case by case, what the general path alone (the script
// without its prelude, lib/fence.lua's check_settle, lib/state.lua's
// write_state, lib/forget.lua's forget and lib/queue.lua's take_tasks)
// writes and answers for the same call; a case that is not its own it
// leaves to the general path having written nothing.
func TestAckSuccessPreludeWritesWhatTheLibWrites(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	ctx := context.Background()
	prelude, general := splitPrelude(t, "ack_success")
	alone := goredis.NewScript(prelude + "return false\n")
	const lease = 30000

	cases := []struct {
		name    string
		setup   func(k *keys, qk *queueKeys) // on top of: a leased, b and c pending
		call    func(k *keys, qk *queueKeys, c *scriptCall)
		answers bool // the prelude alone answers
	}{
		{name: "takes the next", answers: true},
		{name: "nothing pending", answers: true, setup: func(k *keys, qk *queueKeys) {
			client.Del(ctx, qk.pending)
		}},
		{name: "sent before implicit states", answers: true, setup: func(k *keys, qk *queueKeys) {
			client.HDel(ctx, qk.task+"a", "at", "pub")
		}},
		{name: "names with nothing rerouted", answers: true, call: withNames},
		{name: "a task rerouted to the names", call: withNames, setup: func(k *keys, qk *queueKeys) {
			client.SAdd(ctx, qk.rerouted, "n")
			client.SAdd(ctx, qk.names+"k", "n")
			client.RPush(ctx, qk.rerouted+":n", "r")
			client.HSet(ctx, qk.task+"r", "msg", `{"Name":"n"}`, "state", "pending", "rerouted", "n")
		}},
		{name: "paused", setup: func(k *keys, qk *queueKeys) {
			client.Set(ctx, qk.paused, "1", 0)
		}},
		{name: "the next is limited", setup: func(k *keys, qk *queueKeys) {
			client.HSet(ctx, qk.task+"b", "limit", "1 0 0 "+qk.limit+"k")
		}},
		{name: "the next is gone", setup: func(k *keys, qk *queueKeys) {
			client.Del(ctx, qk.task+"b")
		}},
		{name: "the next has an outcome and a limit", answers: true, setup: func(k *keys, qk *queueKeys) {
			client.HSet(ctx, qk.task+"b", "limit", "1 0 0 "+qk.limit+"k", "outcome", `{"State":"SUCCESS"}`)
		}},
		{name: "lease lost", call: func(k *keys, qk *queueKeys, c *scriptCall) {
			c.args[2] = "stale"
		}},
		{name: "lease expired", setup: func(k *keys, qk *queueKeys) {
			client.HSet(ctx, qk.task+"a", "lease_exp", 1)
		}},
		{name: "unique", setup: func(k *keys, qk *queueKeys) {
			client.HSet(ctx, qk.task+"a", "unique", qk.unique+"u")
			client.Set(ctx, qk.unique+"u", "a", time.Hour)
		}},
		{name: "limited", setup: func(k *keys, qk *queueKeys) {
			client.HSet(ctx, qk.task+"a", "limit", "1 0 0 "+qk.limit+"k")
			client.SAdd(ctx, qk.limit+"k:run", "a")
		}},
		{name: "completed retention", call: func(k *keys, qk *queueKeys, c *scriptCall) {
			c.args[3] = 60000
		}},
		{name: "no take", call: func(k *keys, qk *queueKeys, c *scriptCall) {
			c.keys = c.keys[:4]
			c.args[11] = 0
			c.args = c.args[:len(c.args)-3]
		}},
		{name: "group member", call: func(k *keys, qk *queueKeys, c *scriptCall) {
			c.keys = slices.Insert(c.keys, 4, k.group("g").all()...)
			c.args[5] = `{"TaskUUID":"a","State":"SUCCESS"}`
			c.args[7] = 2
		}},
		{name: "a next task", call: func(k *keys, qk *queueKeys, c *scriptCall) {
			c.keys = slices.Insert(c.keys, 4, qk.pending, qk.scheduled, qk.archived, qk.notify, qk.task+"d", k.state("d"))
			c.args = slices.Insert(c.args, len(c.args)-3, interface{}("d"), `{"Name":"n"}`, 0, "")
		}},
	}
	// run sets the case up under a new prefix, runs script and returns its
	// reply (expiry, a clock reading, checked and replaced) or error, what
	// the keys hold before and after, and whether it published a notice
	// on a's state (lib/state.lua's notify_final).
	run := func(t *testing.T, i int, script *goredis.Script) (reply interface{}, before, after map[string]string, published bool) {
		c := cases[i]
		prefix := srv.Prefix(t)
		k := &keys{prefix: strings.TrimSuffix(prefix, ":")}
		qk := k.queue("q")
		far := time.Now().Add(time.Hour).UnixMilli()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(client.HSet(ctx, qk.task+"a", "msg", `{"Name":"n"}`, "state", "active", "lease", "tok", "lease_exp", far, "at", 1000, "pub", "p").Err())
		must(client.ZAdd(ctx, qk.lease, goredis.Z{Score: float64(far), Member: "a"}).Err())
		for _, id := range []string{"b", "c"} {
			must(client.HSet(ctx, qk.task+id, "msg", `{"Name":"n","Args":["`+id+`"]}`, "state", "pending", "at", 1000).Err())
			must(client.RPush(ctx, qk.pending, id).Err())
		}
		if c.setup != nil {
			c.setup(k, qk)
		}
		cl := &scriptCall{
			keys: []string{qk.task + "a", qk.lease, qk.completed, k.state("a"), qk.pending, qk.paused, qk.notify},
			args: []interface{}{"0", "a", "tok", 0, 60000, "", "", 0, 60000, 60000, "0", 3, "0",
				4, "state", "SUCCESS", "name", "n", qk.task, lease, "taken"},
		}
		if c.call != nil {
			c.call(k, qk, cl)
		}
		// A notice the script publishes comes before the one published
		// after it, on one subscription.
		ps := client.Subscribe(ctx, k.state("a"))
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		before = keysSnapshot(t, client, prefix)
		start := time.Now().UnixMilli()
		v, err := script.Run(ctx, client, cl.keys, cl.args...).Result()
		end := time.Now().UnixMilli()
		must(client.Publish(ctx, k.state("a"), "after").Err())
		msg, perr := ps.ReceiveMessage(ctx)
		must(perr)
		published = msg.Payload != "after"
		if err != nil {
			return err, before, keysSnapshot(t, client, prefix), published
		}
		if a, ok := v.([]interface{}); ok && len(a) >= 2 {
			if exp, _ := a[1].(int64); exp < start+lease-1 || exp > end+lease+1 {
				t.Fatalf("expiry %d, want %d..%d", exp, start+lease, end+lease)
			}
			a[1] = "expiry"
		}
		return v, before, keysSnapshot(t, client, prefix), published
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			replyAll, _, afterAll, pubAll := run(t, i, ackSuccessScript)
			replyGeneral, _, afterGeneral, pubGeneral := run(t, i, general)
			if !reflect.DeepEqual(replyAll, replyGeneral) {
				t.Errorf("reply %v, the general path's %v", replyAll, replyGeneral)
			}
			if !reflect.DeepEqual(afterAll, afterGeneral) {
				t.Errorf("keys after\n%v\nafter the general path\n%v", afterAll, afterGeneral)
			}
			if pubAll != pubGeneral {
				t.Errorf("published a notice: %v, the general path %v", pubAll, pubGeneral)
			}
			reply, before, after, pub := run(t, i, alone)
			err, _ := reply.(error)
			if answered := err == nil; answered != c.answers {
				t.Fatalf("the prelude alone answered %v (%v), want %v", answered, reply, c.answers)
			}
			if c.answers {
				if !reflect.DeepEqual(reply, replyGeneral) || pub != pubGeneral {
					t.Errorf("the prelude alone answered %v (notice %v), the general path %v (%v)", reply, pub, replyGeneral, pubGeneral)
				}
				return
			}
			if !errors.Is(err, goredis.Nil) {
				t.Fatalf("the prelude alone: %v, want it to fall through", err)
			}
			if !reflect.DeepEqual(before, after) || pub {
				t.Errorf("the prelude alone, falling through, wrote (notice %v):\nbefore %v\nafter %v", pub, before, after)
			}
		})
	}
}

// scriptCall is a script's keys and arguments.
type scriptCall struct {
	keys []string
	args []interface{}
}

// withNames makes an ack_success call's take one for a worker with task
// names (names key "k"): five take keys.
func withNames(k *keys, qk *queueKeys, c *scriptCall) {
	c.keys = append(c.keys, qk.rerouted, qk.names+"k")
	c.args[11] = 5
}
