-- held reports whether a task hash holds a task its queue still has
-- (pending, scheduled, retry, active, or completed and kept): a task with
-- its id cannot be published. An archived task may be replaced.
local function held(task_key)
	local state = redis.call("HGET", task_key, "state")
	if not state then
		return false, false
	end
	return state ~= "archived", state == "archived"
end

-- put adds a task to its queue (pending list, scheduled zset), replacing
-- an archived task with its id (archived: it was one, see held), due at
-- eta (ms; not after now: at once), recording pub, the token of the
-- publish that sent it, unless it is "", and at, when it was sent (now):
-- its CreatedAt until its worker writes its first state (get_state.lua),
-- and band (lib/band.lua; "" for none). It returns whether the task is
-- pending now.
local function put(pending, scheduled, archived_key, task_key, id, msg, eta, archived, pub, now, band)
	if archived then
		redis.call("ZREM", archived_key, id)
		redis.call("DEL", task_key)
	end
	if band ~= "" then
		redis.call("HSET", task_key, "band", band)
	end
	-- The HSET's arguments are written out rather than built in a table
	-- and unpacked: a table per task is garbage the script's run pays for.
	if eta > now then
		if pub ~= "" then
			redis.call("HSET", task_key, "msg", msg, "state", "scheduled", "pub", pub, "process_at", eta, "at", now)
		else
			redis.call("HSET", task_key, "msg", msg, "state", "scheduled", "process_at", eta, "at", now)
		end
		redis.call("ZADD", scheduled, eta, id)
		due_at(string.sub(scheduled, 1, -10), eta) -- the key's name less "scheduled"
		return false
	end
	if pub ~= "" then
		redis.call("HSET", task_key, "msg", msg, "state", "pending", "pub", pub, "at", now)
	else
		redis.call("HSET", task_key, "msg", msg, "state", "pending", "at", now)
	end
	if band == "" then
		redis.call("RPUSH", pending, id)
	else
		band_push(pending, band, id, false)
	end
	return true
end

-- sent_at returns when a task was sent (ms since the epoch, as a string)
-- from its hash's at (put's) or, for an aggregation member, joined (its
-- join stamp: ms × 1000 plus a sequence, lib/aggregate.lua's agg_join);
-- false for neither.
local function sent_at(at, joined)
	if at then
		return at
	end
	return joined and string.format("%d", math.floor(tonumber(joined) / 1000)) or false
end

-- implied_by reads the task hash key for a task with no state hash
-- (get_state.lua, purge_state.lua): the state the task implies, PENDING
-- while it waits or runs, FAILURE once archived or cancelled after it was
-- sent; the class of its hash's state ("wait", "run" or "failed"), which
-- a purge records in the hash's purged field; and the hash's fields
-- {state, msg, at, joined, error, purged}. false for no task, a completed
-- one, or a marker keeping out a task not sent yet.
local function implied_by(key)
	local t = redis.call("HMGET", key, "state", "msg", "at", "joined", "error", "purged")
	local state = t[1]
	if not state or state == "completed" or state == "cancelled" and not t[3] then
		return false
	end
	if state == "archived" or state == "cancelled" then
		return "FAILURE", "failed", t
	elseif state == "active" then
		return "PENDING", "run", t
	end
	return "PENDING", "wait", t
end

-- wake leaves a wake-up token on a queue's notify list for idle workers,
-- at most one.
local function wake(notify)
	if redis.call("LLEN", notify) == 0 then
		redis.call("LPUSH", notify, "1")
	end
end

-- take_tasks takes up to n tasks of a queue for a worker, each under a
-- lease ending at expiry (ms), appending to out, for each: id, message,
-- retried, recovered, token, outcome (what an earlier holder committed,
-- "" for none). First come tasks rerouted to the caller's names (the
-- rerouted set and the caller's names set, announce.lua; with rerouted
-- false none is taken), then the pending tasks (lib/band.lua's band_pop: by level, then fair key). A limited task over its
-- limit is put aside (lib/limit.lua's limit_admit) and not taken; an id
-- whose hash is gone, or whose hash's state is not "pending" (a second
-- entry of an id, from a publish run twice, whose task is taken already,
-- or finished, scheduled, retrying, archived, aggregating or parked
-- since), is dropped, not taken: every script that puts an id on a
-- pending list sets its state "pending" (a recovered task's too). The
-- next id is then tried, up to 16 more ids than n. Nothing is taken from
-- a paused queue. The tokens are
-- ARGV[tok], ARGV[tok + 1], ..., one per task taken. With notify (not
-- false), when tasks remain pending, a wake-up token is left on it for
-- the next idle worker (a fetch's burst wakes workers one after another),
-- and when tasks rerouted to the caller's names remain, one on the
-- names' own notify list;
-- a settle's take leaves none: its worker goes on, and an idle one is
-- woken by the next publish or looks again within its block timeout. It
-- returns how many tasks it took.
-- Complexity: O(n log L) for L leased tasks, plus O(R) for R names with
-- rerouted tasks when there are any.
local function take_tasks(out, n, prefix, pending, paused, lease, notify, rerouted, names, tok, now, expiry)
	-- Usually none of the paused flag, rerouted tasks and bands
	-- (lib/band.lua) exist. One EXISTS says which do: it counts a key
	-- named twice twice, so the flag named four times, the rerouted set
	-- twice and the levels once each have a bit of their own.
	local levels = pending .. ":levels"
	local flags
	if rerouted then
		flags = redis.call("EXISTS", paused, paused, paused, paused, rerouted, rerouted, levels)
	else
		flags = redis.call("EXISTS", paused, paused, paused, paused, levels)
	end
	if flags >= 4 then
		return 0
	end
	local any_rerouted, banded = flags >= 2, flags % 2 == 1
	local used, taken = 0, 0 -- ids popped, tasks taken (one token each)
	local most = n + 16 -- ids popped at most
	-- take leases the task id, and reports whether it did.
	local function take(id)
		local key = prefix .. id
		local token = ARGV[tok + taken]
		used = used + 1
		local fields = redis.call("HMGET", key, "msg", "retried", "recovered", "outcome", "limit", "state")
		if not fields[1] or fields[6] ~= "pending" then
			return false
		end
		if fields[5] and not fields[4] and not limit_admit(fields[5], key, id, lease, now) then
			redis.call("HDEL", key, "rerouted")
			return false
		end
		redis.call("HSET", key, "state", "active", "lease", token, "lease_exp", expiry)
		redis.call("ZADD", lease, expiry, id)
		table.insert(out, id)
		table.insert(out, fields[1])
		table.insert(out, fields[2] or "0")
		table.insert(out, fields[3] or "0")
		table.insert(out, token)
		table.insert(out, fields[4] or "")
		taken = taken + 1
		return true
	end
	if any_rerouted then
		-- Tasks of the caller's names left behind (a list not emptied, or
		-- a name not reached) wake another of its kind, on a fetch.
		local left = false
		local listed = redis.call("SINTER", rerouted, names)
		for i, name in ipairs(listed) do
			local list = rerouted .. ":" .. name
			while taken < n and used < most do
				local id = redis.call("LPOP", list)
				if not id then
					break
				end
				if take(id) then
					redis.call("HDEL", prefix .. id, "rerouted")
				end
			end
			if redis.call("LLEN", list) == 0 then
				redis.call("SREM", rerouted, name)
			else
				left = true
			end
			if taken >= n or used >= most then
				left = left or i < #listed
				break
			end
		end
		if left and notify then
			local names_notify = names .. ":notify"
			wake(names_notify)
			local ttl = redis.call("PTTL", names)
			if ttl > 0 then
				redis.call("PEXPIRE", names_notify, ttl)
			end
		end
	end
	while taken < n and used < most do
		local id
		if banded then
			id = band_pop(pending)
		else
			id = redis.call("LPOP", pending)
		end
		if not id then
			break
		end
		take(id)
	end
	if notify and band_any(pending) then
		wake(notify)
	end
	return taken
end

-- given_or_all returns the ids in ARGV[first..] or, when there are none,
-- every member of zset (an operator's "all archived tasks").
local function given_or_all(zset, first)
	if #ARGV < first then
		return redis.call("ZRANGE", zset, 0, -1)
	end
	local ids = {}
	for i = first, #ARGV do -- a loop: unpack is bounded by Lua's stack
		table.insert(ids, ARGV[i])
	end
	return ids
end

-- trim_archive deletes the dead letters of the archive zset older than
-- max_age ms, then the oldest beyond max_size, with their task hashes
-- (task_prefix .. id).
local function trim_archive(archived, task_prefix, now, max_age, max_size)
	for _, id in ipairs(redis.call("ZRANGEBYSCORE", archived, "-inf", now - max_age)) do
		redis.call("DEL", task_prefix .. id)
	end
	redis.call("ZREMRANGEBYSCORE", archived, "-inf", now - max_age)
	local excess = redis.call("ZCARD", archived) - max_size
	if excess > 0 then
		for _, id in ipairs(redis.call("ZRANGE", archived, 0, excess - 1)) do
			redis.call("DEL", task_prefix .. id)
		end
		redis.call("ZREMRANGEBYRANK", archived, 0, excess - 1)
	end
end

-- unplace takes a waiting task (hash task_key) out of its place: its
-- band's list (lib/band.lua; band false for none), or, rerouted to the workers with task name rerouted, that
-- name's list (rerouted_set .. ":" .. rerouted, whose name leaves
-- rerouted_set when it empties), the scheduled or retry zset, or its limit
-- key's wait list (parked), by its state. O(N) for N pending or parked,
-- O(log N) otherwise.
local function unplace(task_key, id, state, rerouted, pending, scheduled, retry, rerouted_set, band)
	if state == "limited" then
		limit_unplace(task_key, id)
	elseif state == "pending" then
		if not rerouted then
			band_remove(pending, band, id)
			return
		end
		local list = rerouted_set .. ":" .. rerouted
		redis.call("LREM", list, 1, id)
		if redis.call("LLEN", list) == 0 then
			redis.call("SREM", rerouted_set, rerouted)
		end
	elseif state == "scheduled" then
		redis.call("ZREM", scheduled, id)
	else
		redis.call("ZREM", retry, id)
	end
end
