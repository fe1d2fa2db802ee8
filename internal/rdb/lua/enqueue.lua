-- enqueue: publish tasks to one queue, each publish all or nothing. Safe
-- to run twice, in either order: a second run with the same publish token
-- (sent again after a lost reply, or a first run that reaches Redis after
-- the run sent again) finds the other's tasks, or, with the state keys,
-- their states once the tasks ran and were forgotten (ran_since,
-- overtaken), writes nothing and reports success. Where the states are
-- not at hand (not given on Redis Cluster; kept by a result backend on
-- another server), a first run that arrives after its task, queued by the
-- run sent again, ran and was forgotten queues it again; so does, on a
-- single server, the first run of a task whose UUID its caller chose,
-- cancelled or deleted meanwhile (its state names no publish).
--
-- A member of an aggregation group (lib/aggregate.lua) joins its group
-- instead of pending when it is due now, or waits in the scheduled zset
-- with its group recorded.
--
-- With implicit states (ARGV[2]) a task's PENDING state is not written:
-- on a single server, a task with no state hash that its queue holds is
-- PENDING (get_state.lua reads it from the task hash: its message and at,
-- when it was sent), and the first state its worker writes starts its
-- state hash. The publish deletes the state hash a task's id may have
-- (of an earlier task sent with that id, or the PENDING its workflow
-- wrote), so that it reads as the task now sent; an id its sender has just
-- made (flag "f" below) can have none but what its publish's run sent
-- again led to.
--
-- KEYS[1] pending list      KEYS[2] scheduled zset
-- KEYS[3] archived zset     KEYS[4] notify list (wake-up tokens)
-- KEYS[5..] the tasks' state hashes, one per task, in ARGV's order
--           (optional: on a single server only, where ARGV[2] may be
--           "1")
-- ARGV[1] task hash key prefix ("<prefix>:{<queue>}:t:")
-- ARGV[2] "1" when the tasks' states are implicit (the publish's sender
--         wrote no PENDING state), "0" when the sender wrote their
--         PENDING states before this call
-- ARGV[3] the sender's clock, ms since the epoch, when it built the call:
--         when a task due now was sent (its hash's at, its CreatedAt until
--         a state is written); the server's clock is read only for a task
--         with an ETA (its at is then the server's) or an aggregation
--         group (its join stamp), so under clock skew the two differ
-- ARGV[4..] one or more publishes, each: its publish token (random per
--         publish, kept in each task hash as pub), its flag: "1" when the
--         caller sends it again, not knowing whether its first run
--         happened (a task whose hash is gone counts as published when
--         its state says so: ran_since), "f" for a first run whose tasks'
--         ids the sender has just made (internal/newid: no task hash or
--         state can have them but those of this publish's run sent again,
--         when it overtook this one; with implicit states one EXISTS of
--         the task hash and the state hash looks for both, and no state
--         is deleted), else "0"; how many tasks it has, then for each
--         task: id, message (JSON signature without its UUID and
--         queue: rdb's storedMessage), ETA in ms since the epoch (0:
--         now), its aggregation group ("<name>\n<key>", "" for a task
--         that is no member), its unique key ("<ttl ms> <flag> <key>",
--         the key a string key of its queue's slot, the flag "r" to
--         debounce, else "-"; "" for a task that is not unique), its limit
--         (lib/limit.lua: "<concurrency> <rate> <period ms> <base>", ""
--         for a task that has none), its band (lib/band.lua: its
--         priority level and fair key, "" for neither)
-- The queue's aggregation keys are found from ARGV[1] (lib/aggregate.lua).
--
-- Publishes are independent (concurrent senders' publishes to one queue
-- share a call: combine.go's combiner), each all or nothing, run in order as
-- if each were a call of its own.
--
-- Returns: for each publish, in order, {0} when every task was published
-- (by this run or another with the same token, whose tasks may have run,
-- been archived or been forgotten since: then nothing is written), or
-- {1, id} when a task with that id is held by the queue (lib/queue.lua's
-- held) from another publish or appears twice in the publish, {4, id}
-- when the task is a member and no announcement alive
-- (announce_aggregators.lua) covers its task name, or {5, id, holder}
-- when the task is unique and its key is held by the task holder (of an
-- earlier publish, or of this one); then nothing of that publish was
-- written. A task that debounces (replace), alone in its publish, whose
-- key a pending or scheduled holder has, replaces the holder's message
-- (with the holder's id) and ETA instead, refreshes the key's ttl, and
-- gets {6, id, holder}. A task kept out by its workflow's cancellation
-- (cancel.lua's bar) gets {7, id, reason}. A task whose id is archived replaces it. A unique task holds
-- its key (SET PX its ttl, the key named in its hash's unique field) until
-- it finishes (lib/forget.lua's release_unique) or the ttl passes.
-- Complexity: O(N log M) for N tasks and M scheduled tasks or members of
-- a group.

-- The common sends, one publish of one task that is due now, whose id its
-- sender made (flag "f"), with no unique key, limit or band, are written here,
-- before the lib definitions (rdb's libMark): a task that is no member as
-- lib/queue.lua's put and wake would write it, a member as check, write
-- and the end below (lib/aggregate.lua's agg_policy, agg_join,
-- agg_file_new, with lib/due.lua's due_at, and agg_count) would, having
-- read the policy and the group's newest stamp before its first write (a
-- refusal for memory, at that write, leaves nothing written).
-- TestEnqueuePreludeWritesWhatTheLibWrites holds the two together.
-- It writes only when the task's hash is not there, nor, with implicit
-- states, its state hash (one EXISTS of both), nor, with states written
-- before, a state other than the sender's PENDING: a first run can reach
-- Redis after the run its sender sent again when its reply did not come
-- (held up in the network, or in the socket buffer of a server that
-- hung), and then check finds whether this publish ran.
local fresh = false
if #ARGV == 13 and ARGV[4] ~= "" and ARGV[5] == "f" and ARGV[6] == "1" and ARGV[9] == "0"
	and ARGV[11] == "" and ARGV[12] == "" and ARGV[13] == "" then
	local task_key = ARGV[1] .. ARGV[7]
	if #KEYS < 5 then
		fresh = redis.call("EXISTS", task_key) == 0
	elseif ARGV[2] == "1" then
		fresh = redis.call("EXISTS", task_key, KEYS[5]) == 0
	else
		fresh = redis.call("EXISTS", task_key) == 0 and (redis.call("HGET", KEYS[5], "state") or "PENDING") == "PENDING"
	end
end
if fresh then
	local id, g = ARGV[7], ARGV[10]
	local task_key = ARGV[1] .. id
	if g == "" then
		redis.call("HSET", task_key, "msg", ARGV[8], "state", "pending", "pub", ARGV[4], "at", ARGV[3])
		redis.call("RPUSH", KEYS[1], id)
		if redis.call("LLEN", KEYS[4]) == 0 then
			redis.call("LPUSH", KEYS[4], "1")
		end
		return { { 0 } }
	end
	local P = string.sub(ARGV[1], 1, -3) .. "agg:"
	local cut = string.find(g, "\n", 1, true)
	local name, key = string.sub(g, 1, cut - 1), string.sub(g, cut + 1)
	local t = redis.call("TIME")
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	local till, size, delay, grace = string.match(redis.call("HGET", P .. "policies", name) or "", "^(%d+) (%d+) (%d+) (%d+)$")
	if not till or tonumber(till) <= now then
		return { { 4, id } }
	end
	size, delay, grace = tonumber(size), tonumber(delay), tonumber(grace)
	local members = P .. "group:" .. g
	local stamp = now * 1000
	local last = tonumber(redis.call("ZRANGE", members, "-1", "-1", "WITHSCORES")[2])
	if last and last >= stamp then
		stamp = last + 1
	end
	local joined = string.format("%d", stamp)
	redis.call("ZADD", members, joined, id)
	if not last then
		redis.call("SADD", P .. "groups", g)
	end
	redis.call("HSET", task_key, "state", "aggregating", "group", g, "joined", joined, "msg", ARGV[8], "pub", ARGV[4])
	redis.call("INCRBY", P .. "count", 1)
	local due
	if not last then
		if delay > 0 then
			due = now + delay
		end
		if grace > 0 and (not due or now + grace < due) then
			due = now + grace
		end
	end
	if size > 0 and (not due or due > now) and redis.call("ZCARD", members) >= size then
		due = now
	end
	if due then
		redis.call("ZADD", P .. "due:" .. name, "LT", due, key)
		if due > now then
			-- lib/due.lua's due_at
			local qbase = string.sub(P, 1, -5)
			local plan = redis.call("GET", qbase .. "fnext")
			if plan and due < tonumber(plan) then
				redis.call("SET", qbase .. "fnext", string.format("%d", due), "KEEPTTL")
				redis.call("PUBLISH", qbase .. "fwake", "")
			end
		else
			local notify = P .. "notify:" .. name
			if redis.call("LLEN", notify) == 0 then
				redis.call("LPUSH", notify, "1")
			end
		end
	end
	return { { 0 } }
end
-- lib definitions here

local sent = tonumber(ARGV[3])
local now -- the server's clock (ms), once clock() has read it

-- clock returns the server's clock, reading it (TIME) at the first call:
-- a run whose tasks are all due now and no members needs not.
local function clock()
	now = now or now_ms()
	return now
end

-- later reports whether a task with ETA eta (ms; 0: now) is due after now.
local function later(eta)
	return eta > 0 and eta > clock()
end

local implicit = ARGV[2] == "1" and #KEYS > 4
local stride = 7
local states = #KEYS > 4
local P -- the aggregation prefix, once a member is met
local live = {} -- task name → its policy, with an announcement alive
local ready = false
local joined = {} -- groups joined → whether each was empty, to file once

-- ran_since reports whether the task whose state hash is key, of the
-- repeated publish token, was published by its first run and has run
-- since (its hash is gone). When states are implicit: its state names
-- token (a state written while the task's hash was there keeps its pub:
-- lib/state.lua's write_state, set_state.lua). A state without one was
-- written when the hash was gone: the PENDING of an aggregation member
-- whose batch was built says its publish ran; any other (its workflow's
-- PENDING, an earlier task's with the same UUID, or the FAILURE of this
-- one cancelled or deleted since) counts as not run, and the task is
-- queued: sent twice rather than lost. With strict, only a state that
-- names token counts. When the sender wrote PENDING before: an outcome.
local function ran_since(key, token, strict)
	if implicit then
		local s = redis.call("HMGET", key, "pub", "state", "aggregate")
		if s[1] or strict then
			return s[1] == token
		end
		return s[2] == "PENDING" and s[3] and true or false
	end
	local state = redis.call("HGET", key, "state")
	return state == "SUCCESS" or state == "FAILURE"
end

-- overtaken reports whether the task whose state hash is key, of a
-- publish's first run (not a repeat) with token, whose hash is not there,
-- was published by the run its sender sent again and has run since (the
-- repeat overtook this run on its way): its state names token (a state
-- written while the task's hash was there keeps its pub: lib/state.lua's
-- write_state), or, for an id its sender made (made), which can have no
-- state but the ones its task's publish leads to, it has a state: with
-- implicit states any, else one other than the PENDING its sender wrote
-- (its cancellation's FAILURE, written when the hash was gone, included).
-- It also reports whether the state hash is there: the one read spares
-- write the delete of a state that is not.
local function overtaken(key, token, made)
	local s = redis.call("HMGET", key, "pub", "state")
	local there = (s[1] or s[2]) and true or false
	if s[1] == token then
		return true, there
	end
	return made and s[2] and (implicit or s[2] ~= "PENDING") or false, there
end

-- parse_unique reads a task's unique item: its ttl (ms), its key, and
-- whether it debounces.
local function parse_unique(u)
	local ttl, flag, ukey = string.match(u, "^(%d+) ([r-]) (.+)$")
	return ttl, ukey, flag == "r"
end

-- replaced gives the message msg of task id (a message without the id:
-- rdb's storedMessage), its ETA (ms) and its band to holder when holder
-- waits (pending, not rerouted, or scheduled), refreshing unique key
-- ukey's ttl; it reports whether it did. A pending holder whose band
-- changes goes to the tail of its new band's list.
local function replaced(holder, msg, eta, band, ukey, ttl)
	local holder_key = ARGV[1] .. holder
	local h = redis.call("HMGET", holder_key, "state", "rerouted", "outcome", "group", "band")
	local state = h[1]
	if (state ~= "pending" and state ~= "scheduled") or h[2] or h[3] or h[4] then
		return false
	end
	local old = h[5] or ""
	if band ~= "" then
		redis.call("HSET", holder_key, "msg", msg, "band", band)
	else
		redis.call("HSET", holder_key, "msg", msg)
		redis.call("HDEL", holder_key, "band")
	end
	if state == "pending" and (old ~= band or later(eta)) then
		band_remove(KEYS[1], old, holder)
		if not later(eta) then
			band_push(KEYS[1], band, holder, false)
		end
	end
	if later(eta) then
		redis.call("HSET", holder_key, "state", "scheduled", "process_at", eta)
		redis.call("ZADD", KEYS[2], eta, holder)
		due_at(string.sub(KEYS[2], 1, -10), eta)
	elseif state == "scheduled" then
		redis.call("ZREM", KEYS[2], holder)
		redis.call("HDEL", holder_key, "process_at")
		redis.call("HSET", holder_key, "state", "pending")
		band_push(KEYS[1], band, holder, false)
		ready = true
	end
	redis.call("SET", ukey, holder, "PX", ttl)
	return true
end

-- check returns nil when the publish whose tasks are ARGV[first..last]
-- (their state keys from KEYS[key + 1]) can be written, else its reply:
-- {0} when it ran before, {1, id}, {4, id}, {5, id, holder}, or {6, id,
-- holder} when its one task debounced (then replaced has written the
-- holder). It also returns which of its tasks replace an archived one,
-- and which, in a first run, have a state hash (overtaken): sets of ids,
-- or nil for none.
local function check(token, repeated, made, first, last, key)
	-- The tables are made when needed: most publishes have one task, no
	-- unique key, no archived task to replace and no state.
	local seen, archived, keys, stated
	local n = key
	for i = first, last, stride do
		local id = ARGV[i]
		local task_key = ARGV[1] .. id
		n = n + 1
		-- An id its sender made has no task hash or state unless this
		-- publish's run sent again overtook this one: with implicit states
		-- one EXISTS of both says so.
		local fresh = made and implicit and redis.call("EXISTS", task_key, KEYS[n]) == 0
		local busy, was_archived = false, false
		if not fresh then
			busy, was_archived = held(task_key)
		end
		-- This publish ran before (the tasks went in all at once) when a
		-- task hash (queued, running, kept or archived since) names this
		-- publish or, once the task was forgotten, the task has a state
		-- that says so (ran_since for a repeat, overtaken for a first run
		-- that its repeat overtook): nothing more to do.
		if (busy or was_archived) and redis.call("HGET", task_key, "pub") == token then
			return {0}
		end
		if states and not fresh and not busy and not was_archived then
			if repeated then
				if ran_since(KEYS[n], token, false) then
					return {0}
				end
			else
				local ran, there = overtaken(KEYS[n], token, made)
				if ran then
					return {0}
				end
				if there then
					stated = stated or {}
					stated[id] = true
				end
			end
		end
		if busy and redis.call("HGET", task_key, "state") == "cancelled" then
			-- Kept out, unless this publish ran before the cancellation
			-- (its reply lost) and its task ran since: its state says so.
			if repeated and states and ran_since(KEYS[n], token, true) then
				return {0}
			end
			return {7, id, redis.call("HGET", task_key, "error") or ""}
		end
		if busy or seen and seen[id] then
			return {1, id}
		end
		local g = ARGV[i + 3]
		if g ~= "" then
			P = P or agg_prefix(ARGV[1])
			local name = agg_split(g)
			if not live[name] then
				local policy = agg_policy(P, name)
				if not policy or policy.till <= clock() then
					return {4, id}
				end
				live[name] = policy
			end
		end
		local u = ARGV[i + 4]
		if u ~= "" then
			local ttl, ukey, replace = parse_unique(u)
			local holder = keys and keys[ukey] or redis.call("GET", ukey)
			if holder and holder ~= id then
				if replace and first == last and replaced(holder, ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 6], ukey, ttl) then
					return {6, id, holder}
				end
				return {5, id, holder}
			end
			keys = keys or {}
			keys[ukey] = id
		end
		if first ~= last then
			seen = seen or {}
			seen[id] = true
		end
		if was_archived then
			archived = archived or {}
			archived[id] = true
		end
	end
	return nil, archived, stated
end

-- write writes the tasks of a publish check passed (archived and stated:
-- check's sets).
local function write(token, repeated, made, first, last, key, archived, stated)
	local n = key
	for i = first, last, stride do
		local id = ARGV[i]
		local was_archived = archived and archived[id]
		n = n + 1
		if implicit and not made and (repeated or was_archived or stated and stated[id]) then
			-- A state of an earlier task with this id, or the PENDING
			-- the task's workflow wrote, gives way to the one its hash
			-- implies. (A first run's check found whether there is one.)
			redis.call("DEL", KEYS[n])
		end
		local task_key, g, eta = ARGV[1] .. id, ARGV[i + 3], tonumber(ARGV[i + 2])
		if g == "" then
			-- Due now (eta 0): sent at the sender's clock, no TIME.
			local t = eta > 0 and clock() or sent
			if put(KEYS[1], KEYS[2], KEYS[3], task_key, id, ARGV[i + 1], eta, was_archived, token, t, ARGV[i + 6]) then
				ready = true
			end
		elseif later(eta) then
			put(KEYS[1], KEYS[2], KEYS[3], task_key, id, ARGV[i + 1], eta, was_archived, token, clock(), ARGV[i + 6])
			redis.call("HSET", task_key, "group", g)
		else
			if was_archived then
				redis.call("ZREM", KEYS[3], id)
				redis.call("DEL", task_key)
			end
			local was_empty = agg_join(P, g, task_key, id, nil, clock(), ARGV[i + 1], token)
			joined[g] = joined[g] or was_empty
		end
		local u = ARGV[i + 4]
		if u ~= "" then
			local ttl, ukey = parse_unique(u)
			redis.call("SET", ukey, id, "PX", ttl)
			redis.call("HSET", task_key, "unique", ukey)
		end
		if ARGV[i + 5] ~= "" then
			redis.call("HSET", task_key, "limit", ARGV[i + 5])
		end
	end
end

local replies = {}
local i, key = 4, 4 -- the next publish's first item; KEYS before its first state key
while i <= #ARGV do
	local token, repeated, made, count = ARGV[i], ARGV[i + 1] == "1", ARGV[i + 1] == "f", tonumber(ARGV[i + 2])
	local first = i + 3
	local last = first + (count - 1) * stride
	local reply, archived, stated = check(token, repeated, made, first, last, key)
	if not reply then
		write(token, repeated, made, first, last, key, archived, stated)
		reply = {0}
	end
	table.insert(replies, reply)
	i = first + count * stride
	if states then
		key = key + count
	end
end
if next(joined) then
	agg_file_new(P, joined, clock(), live)
end
if ready then
	wake(KEYS[4])
end
return replies
