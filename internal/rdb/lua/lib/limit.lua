-- Per-key limits (tasks.Limit). A limited task's hash has the field
-- limit, "<concurrency> <rate> <period ms> <base>", base the prefix of its
-- key's keys, in its queue's slot ("<prefix>:{<queue>}:limit:<key>"):
--   base .. ":run"   set: the tasks that hold a concurrency slot
--   base .. ":wait"  list: the tasks parked until a slot frees (their
--                    state "limited")
--   base .. ":tat"   string: the GCRA's theoretical arrival time (ms)
-- and the queue's "limited" counts the tasks parked on all its keys.
-- A holder keeps its slot while its lease lives in its queue's lease zset:
-- a dead worker's slot comes back with its lease. A task deferred by the
-- rate books the slot it is deferred to (its hash's limit_slot), and
-- starts then without spending the rate again.

local function limit_parse(l)
	local conc, rate, per, base = string.match(l, "^(%d+) (%d+) (%d+) (.+)$")
	return tonumber(conc), tonumber(rate), tonumber(per), base
end

-- limit_queue returns the prefix of the queue keys ("<prefix>:{<queue>}:")
-- of the task hash task_key of task id.
local function limit_queue(task_key, id)
	return string.sub(task_key, 1, #task_key - #id - 2)
end

-- limit_unpark moves up to n tasks parked on base back to the head of
-- their queue's pending list (qbase the queue's key prefix) and wakes an
-- idle worker: a slot may have freed. A parked task that is no longer
-- parked (cancelled, deleted) is skipped.
local function limit_unpark(base, qbase, n)
	local woken = false
	while n > 0 do
		local id = redis.call("LPOP", base .. ":wait")
		if not id then
			break
		end
		local key = qbase .. "t:" .. id
		if redis.call("HGET", key, "state") == "limited" then
			redis.call("DECR", qbase .. "limited")
			redis.call("HSET", key, "state", "pending")
			redis.call("LPUSH", qbase .. "pending", id)
			woken = true
			n = n - 1
		end
	end
	if woken and redis.call("LLEN", qbase .. "notify") == 0 then
		redis.call("LPUSH", qbase .. "notify", "1")
	end
end

-- limit_admit decides whether task id (hash task_key, limit l), about to
-- be leased at now, may start: it returns 0 when it may (it holds a
-- concurrency slot, and has spent the rate), else it has put the task
-- aside and returns false: parked on its key while the concurrency is
-- full, or, over the rate, scheduled at the slot it booked.
local function limit_admit(l, task_key, id, lease_key, now)
	local conc, rate, per, base = limit_parse(l)
	local qbase = limit_queue(task_key, id)
	if conc > 0 then
		local run = base .. ":run"
		local live, stale = 0, 0
		for _, h in ipairs(redis.call("SMEMBERS", run)) do
			local exp = h ~= id and redis.call("ZSCORE", lease_key, h)
			if exp and tonumber(exp) > now then
				live = live + 1
			else
				redis.call("SREM", run, h)
				stale = stale + 1
			end
		end
		if live >= conc then
			redis.call("RPUSH", base .. ":wait", id)
			redis.call("INCR", qbase .. "limited")
			redis.call("HSET", task_key, "state", "limited")
			return false
		end
		-- Slots of dead holders beyond the one taken here: parked tasks
		-- may have them.
		if stale > 1 then
			limit_unpark(base, qbase, stale - 1)
		end
	end
	if rate > 0 then
		local booked = tonumber(redis.call("HGET", task_key, "limit_slot"))
		if booked and booked <= now then
			redis.call("HDEL", task_key, "limit_slot")
		elseif not booked then
			-- GCRA without a burst: one start every per / rate ms, so
			-- that no period holds more than rate starts.
			local step = per / rate
			local slot = math.max(tonumber(redis.call("GET", base .. ":tat")) or 0, now)
			redis.call("SET", base .. ":tat", tostring(slot + step), "PX", math.ceil(slot + step - now) + 1)
			if slot > now then
				slot = math.ceil(slot)
				redis.call("HSET", task_key, "state", "scheduled", "process_at", slot, "limit_slot", slot)
				redis.call("ZADD", qbase .. "scheduled", slot, id)
				return false
			end
		else
			-- Brought back before its booked slot (run now by an
			-- operator): it waits for it.
			redis.call("HSET", task_key, "state", "scheduled", "process_at", booked)
			redis.call("ZADD", qbase .. "scheduled", booked, id)
			return false
		end
	end
	if conc > 0 then
		redis.call("SADD", base .. ":run", id)
	end
	return 0
end

-- limit_free frees the concurrency slot task id (hash task_key) may hold
-- under limit l (its hash's limit field, or false), as it stops running
-- (settled, given back, recovered, cancelled), and lets one parked task
-- of its key try again.
local function limit_free(l, task_key, id)
	if not l then
		return
	end
	local conc, _, _, base = limit_parse(l)
	if conc > 0 then
		redis.call("SREM", base .. ":run", id)
		limit_unpark(base, limit_queue(task_key, id), 1)
	end
end

-- limit_release is limit_free with the limit read from the hash.
local function limit_release(task_key, id)
	limit_free(redis.call("HGET", task_key, "limit"), task_key, id)
end

-- limit_unplace takes task id, parked on its key, out of the key's wait
-- list (cancelled, deleted, archived or run now by an operator).
local function limit_unplace(task_key, id)
	local l = redis.call("HGET", task_key, "limit")
	if l then
		local _, _, _, base = limit_parse(l)
		if redis.call("LREM", base .. ":wait", 1, id) > 0 then
			redis.call("DECR", limit_queue(task_key, id) .. "limited")
		end
	end
end
