-- Aggregation (rdb's aggregate.go). A queue's aggregation keys start with
-- its aggregation prefix P, "<prefix>:{<queue>}:agg:": P .. "policies"
-- (hash: task name → "<till ms> <max size> <max delay ms> <grace ms>"),
-- P .. "groups" (set of the groups with waiting members), P .. "count"
-- (members waiting or in batches), P .. "group:" .. g (zset: a group's
-- waiting member ids by join stamp), P .. "due:" .. name (zset: the keys of
-- name's groups that will be due, by a time in ms no later than their due
-- time: see the due index below), P .. "batches:" ..
-- name (zset: name's batch ids by lease end or retry time, ms) and
-- P .. "batch:" .. id (hash: name, key, msg (the member ids, oldest first,
-- as a JSON array), lease, lease_exp, settled, failed, recovered, error)
-- and P .. "notify:" .. name (list: a wake-up token for an idle worker
-- that aggregates name, left when one of name's groups or batches is due:
-- by the member that filled a group, by the queue's elected maintainer
-- (forward.lua) when a due time comes, by a worker that claimed a batch
-- while more are due).
-- A group g is "<name>\n<key>" (task names hold no newline). A member's
-- join stamp is when it joined, in ms, times 1000 plus a sequence number,
-- so members that join in the same millisecond keep their order; its task
-- hash keeps it (joined) and its group (group).

-- agg_prefix returns the aggregation prefix of the queue whose task hash
-- prefix is task_prefix ("<prefix>:{<queue>}:t:").
local function agg_prefix(task_prefix)
	return string.sub(task_prefix, 1, -3) .. "agg:"
end

-- agg_split returns the name and key of group g.
local function agg_split(g)
	local i = string.find(g, "\n", 1, true)
	return string.sub(g, 1, i - 1), string.sub(g, i + 1)
end

-- agg_policy returns the policy last announced for name on P's queue,
-- {till, size, delay, grace, rule} (ms; rule is the text after till), or
-- nil when none was.
local function agg_policy(P, name)
	local v = redis.call("HGET", P .. "policies", name)
	if not v then
		return nil
	end
	local till, size, delay, grace = string.match(v, "^(%d+) (%d+) (%d+) (%d+)$")
	if not till then
		return nil
	end
	return { till = tonumber(till), size = tonumber(size), delay = tonumber(delay), grace = tonumber(grace),
		rule = size .. " " .. delay .. " " .. grace }
end

-- The due index holds, for each group, a time no later than the group is
-- due: claim_batch files a group it finds there early at its true time
-- (agg_schedule) and takes it only then. So a member that joins now moves
-- nothing in the index unless it is its group's first (agg_file_new), and
-- a send that only moves a group's grace period on costs no write there.
-- Every other change (members taken, requeued or joining with an old
-- stamp, a policy announced anew) files the group at its true time.

-- agg_schedule files group g in its name's due index by when its policy
-- makes it due (full: when its MaxSize-th member joined; its oldest
-- member's join plus MaxDelay; its newest's plus GracePeriod; the
-- soonest), or takes it out when it is never due, and returns the due
-- time (nil: never). An empty group leaves the set of groups. policy, when
-- the caller has read it (agg_policy), saves reading it again. The
-- queue's maintainer is told of the due time (lib/due.lua's due_at), so
-- that it wakes the name's workers then; with now, the caller takes a
-- group due by now itself, and only a later time is told.
local function agg_schedule(P, g, policy, now)
	local name, key = agg_split(g)
	local members = P .. "group:" .. g
	local due_key = P .. "due:" .. name
	local n = redis.call("ZCARD", members)
	if n == 0 then
		redis.call("SREM", P .. "groups", g)
		redis.call("ZREM", due_key, key)
		return nil
	end
	policy = policy or agg_policy(P, name)
	local due
	local function sooner(rank, delay)
		local m = redis.call("ZRANGE", members, rank, rank, "WITHSCORES")
		local t = math.floor(tonumber(m[2]) / 1000) + delay
		if not due or t < due then
			due = t
		end
	end
	if policy then
		if policy.size > 0 and n >= policy.size then
			sooner(policy.size - 1, 0)
		end
		if policy.delay > 0 then
			sooner(0, policy.delay)
		end
		if policy.grace > 0 then
			sooner(-1, policy.grace)
		end
	end
	if due then
		redis.call("ZADD", due_key, due, key)
		if not now or due > now then
			due_at(string.sub(P, 1, -5), due) -- P less "agg:"
		end
	else
		redis.call("ZREM", due_key, key)
	end
	return due
end

-- agg_joins is what this script run's joins leave to do once: the members
-- to count (agg_count) and, by group, the stamp of the newest member a join
-- made now (a later join in the run needs not read it back).
local agg_joins = { n = 0, last = {} }

-- agg_count adds the members that joined in this run to P .. "count".
local function agg_count(P)
	if agg_joins.n > 0 then
		redis.call("INCRBY", P .. "count", agg_joins.n)
		agg_joins.n = 0
	end
end

-- agg_wake leaves a wake-up token for an idle worker that aggregates
-- name (at most one waits).
local function agg_wake(P, name)
	wake(P .. "notify:" .. name)
end

-- agg_file counts the joins of the run (agg_count), files the groups of
-- the set joined (agg_schedule) and wakes the workers of the names with a
-- group due by now (agg_wake).
local function agg_file(P, joined, now)
	agg_count(P)
	local woken = {}
	for g in pairs(joined) do
		local name = agg_split(g)
		local due = agg_schedule(P, g, nil, now)
		if due and due <= now and not woken[name] then
			agg_wake(P, name)
			woken[name] = true
		end
	end
end

-- agg_join adds task id (its hash task_key) to group g with join stamp
-- stamp or, when stamp is nil, as the group's newest member now; msg and
-- pub (optional) are the task hash's msg and pub, set in the same HSET.
-- The caller files the group (agg_schedule, or agg_file_new for members
-- that joined now) once it has added its members, and counts the joins
-- (agg_file and agg_file_new do). With stamp nil it returns whether the
-- group was empty. enqueue.lua's prelude writes out agg_policy, agg_join
-- and agg_file_new for a made member due now:
-- TestEnqueuePreludeWritesWhatTheLibWrites holds them together.
local function agg_join(P, g, task_key, id, stamp, now, msg, pub)
	local members = P .. "group:" .. g
	local new_group = true
	if not stamp then
		stamp = now * 1000
		local last = agg_joins.last[g]
		if not last then
			last = tonumber(redis.call("ZRANGE", members, "-1", "-1", "WITHSCORES")[2])
		end
		if last then
			new_group = false
			if last >= stamp then
				stamp = last + 1
			end
		end
		agg_joins.last[g] = stamp
	end
	-- The stamp as an integer string, for the ZADD and the hash alike (a
	-- number would be formatted in the call).
	local joined = string.format("%d", stamp)
	redis.call("ZADD", members, joined, id)
	if new_group then
		redis.call("SADD", P .. "groups", g)
	end
	agg_joins.n = agg_joins.n + 1
	if msg then
		redis.call("HSET", task_key, "state", "aggregating", "group", g, "joined", joined, "msg", msg, "pub", pub)
	else
		redis.call("HSET", task_key, "state", "aggregating", "group", g, "joined", joined)
	end
	return new_group
end

-- agg_file_new files the groups of joined (group → whether it was empty
-- before) after members joined them now, by their names' policies (by
-- task name; every group's has one): a group that was empty is filed at
-- the soonest its policy allows, one that holds MaxSize members is due
-- now; either wakes the name's workers (agg_wake) when due now. A group's
-- grace period moving on changes nothing (see the due index above). It
-- counts the joins of the run (agg_count).
local function agg_file_new(P, joined, now, policies)
	agg_count(P)
	local woken = {}
	for g, was_empty in pairs(joined) do
		local name, key = agg_split(g)
		local policy = policies[name]
		local due
		if was_empty then
			if policy.delay > 0 then
				due = now + policy.delay
			end
			if policy.grace > 0 and (not due or now + policy.grace < due) then
				due = now + policy.grace
			end
		end
		if policy.size > 0 and (not due or due > now) and redis.call("ZCARD", P .. "group:" .. g) >= policy.size then
			due = now
		end
		if due then
			redis.call("ZADD", P .. "due:" .. name, "LT", due, key)
			if due > now then
				due_at(string.sub(P, 1, -5), due)
			elseif not woken[name] then
				agg_wake(P, name)
				woken[name] = true
			end
		end
	end
end

-- agg_forget_batch forgets batch id (hash batch, listed in the name's
-- batches zset) and its members (their task hashes, task_prefix .. member
-- id), and uncounts them (count, P .. "count"): its aggregate has been
-- published.
local function agg_forget_batch(batch, batches, count, id, task_prefix)
	local ids = cjson.decode(redis.call("HGET", batch, "msg"))
	-- One DEL per 1000 members: a call's arguments are bounded by Lua's
	-- stack, and each call costs more than a key.
	for first = 1, #ids, 1000 do
		local keys = {}
		for i = first, math.min(first + 999, #ids) do
			keys[#keys + 1] = task_prefix .. ids[i]
		end
		redis.call("DEL", unpack(keys))
	end
	redis.call("DECRBY", count, #ids)
	redis.call("ZREM", batches, id)
	redis.call("DEL", batch)
end

-- agg_publish publishes an aggregate (id, msg, ETA eta in ms, limit: see
-- lib/limit.lua, "" for none, publish token pub, band: lib/band.lua, ""
-- for none) to its queue (its task
-- hash task_key; pending list, scheduled and archived zsets, notify list),
-- as enqueue.lua publishes a task (lib/queue.lua's held and put), without
-- its state. It returns false, changing nothing, when the queue holds a
-- task with the aggregate's id.
local function agg_publish(task_key, pending, scheduled, archived_key, notify, id, msg, eta, limit, pub, now, band)
	local busy, archived = held(task_key)
	if busy then
		return false
	end
	local ready = put(pending, scheduled, archived_key, task_key, id, msg, eta, archived, pub, now, band)
	if limit ~= "" then
		redis.call("HSET", task_key, "limit", limit)
	end
	if ready then
		wake(notify)
	end
	return true
end
