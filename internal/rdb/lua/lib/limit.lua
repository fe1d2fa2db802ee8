-- Per-key limits (tasks.Limit). A limited task's hash has the field
-- limit, "<concurrency> <rate> <period ms> <base>", base the prefix of its
-- key's keys, in its queue's slot ("<prefix>:{<queue>}:limit:<key>"):
--   base .. ":run"   set: the tasks that hold a concurrency slot
--   base .. ":wait"  list: the tasks parked until a slot frees (their
--                    state "limited")
--   base .. ":tat"   string: the GCRA's theoretical arrival time (ms)
-- and the queue's "parked" zset holds the tasks parked on all its keys,
-- by when they were parked (ms), for listing.
-- A holder keeps its slot while its lease lives in its queue's lease zset:
-- a dead worker's slot comes back with its lease. A task deferred by the
-- rate books the slot it is deferred to (its hash's limit_slot), and
-- starts then without spending the rate again, unless the concurrency
-- parks it first (then it books again when it comes back).

-- limit_parse reads limit l; one that cannot be read (the broker checks
-- limits before it sends them) limits nothing: conc and rate 0.
local function limit_parse(l)
	local conc, rate, per, base = string.match(l, "^(%d+) (%d+) (%d+) (.+)$")
	if not base then
		return 0, 0, 0, ""
	end
	return tonumber(conc), tonumber(rate), tonumber(per), base
end

-- limit_queue returns the prefix of the queue keys ("<prefix>:{<queue>}:")
-- of the task hash task_key of task id.
local function limit_queue(task_key, id)
	return string.sub(task_key, 1, #task_key - #id - 2)
end

-- limit_unpark moves up to n tasks parked on base back to the head of
-- their band's list (lib/band.lua) (qbase the queue's key prefix) and wakes an
-- idle worker: a slot may have freed. A parked task that is no longer
-- parked (cancelled, deleted) is skipped.
local function limit_unpark(base, qbase, n)
	local back = {}
	while #back < n do
		local id = redis.call("LPOP", base .. ":wait")
		if not id then
			break
		end
		local key = qbase .. "t:" .. id
		local h = redis.call("HMGET", key, "state", "band")
		if h[1] == "limited" then
			redis.call("ZREM", qbase .. "parked", id)
			redis.call("HSET", key, "state", "pending")
			table.insert(back, { id, h[2] })
		end
	end
	-- Backwards, so that they keep the order they were parked in.
	for i = #back, 1, -1 do
		band_push(qbase .. "pending", back[i][2], back[i][1], true)
	end
	if #back > 0 and redis.call("LLEN", qbase .. "notify") == 0 then
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
			-- A slot booked by the rate is given up: it books again when
			-- it comes back, so that starts stay a step apart.
			redis.call("RPUSH", base .. ":wait", id)
			redis.call("ZADD", qbase .. "parked", now, id)
			redis.call("HSET", task_key, "state", "limited")
			redis.call("HDEL", task_key, "limit_slot")
			return false
		end
		-- Slots of dead holders beyond the one taken here: parked tasks
		-- may have them.
		if stale > 1 then
			limit_unpark(base, qbase, stale - 1)
		end
	end
	if rate > 0 then
		-- GCRA without a burst: one start every per / rate ms, so that no
		-- period holds more than rate starts. A task deferred earlier
		-- starts at the slot it booked; taken late (its queue's scheduled
		-- tasks are forwarded a little after they are due), it pushes the
		-- next slot a step past its start.
		local step = per / rate
		local tat = tonumber(redis.call("GET", base .. ":tat")) or 0
		local booked = tonumber(redis.call("HGET", task_key, "limit_slot"))
		if booked then
			if booked > now then
				-- Brought back early (a debounce made it due now): it
				-- waits for its start.
				redis.call("HSET", task_key, "state", "scheduled", "process_at", booked)
				redis.call("ZADD", qbase .. "scheduled", booked, id)
				due_at(qbase, booked)
				return false
			end
			redis.call("HDEL", task_key, "limit_slot")
			if now + step > tat then
				redis.call("SET", base .. ":tat", string.format("%.3f", now + step), "PX", math.ceil(step) + 1)
			end
		else
			local slot = math.max(tat, now)
			redis.call("SET", base .. ":tat", string.format("%.3f", slot + step), "PX", math.ceil(slot + step - now) + 1)
			if slot > now then
				slot = math.ceil(slot)
				redis.call("HSET", task_key, "state", "scheduled", "process_at", slot, "limit_slot", slot)
				redis.call("ZADD", qbase .. "scheduled", slot, id)
				due_at(qbase, slot)
				return false
			end
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

-- limit_pass lets one task parked on the key of task id (hash task_key),
-- which waits and leaves for good (deleted, archived, cancelled), try
-- again: a holder's end may have unparked it for the slot it freed. A
-- task let try again that finds the key full is parked again.
local function limit_pass(task_key, id)
	local l = redis.call("HGET", task_key, "limit")
	if l then
		local conc, _, _, base = limit_parse(l)
		if conc > 0 then
			limit_unpark(base, limit_queue(task_key, id), 1)
		end
	end
end

-- limit_release is limit_free with the limit read from the hash.
local function limit_release(task_key, id)
	limit_free(redis.call("HGET", task_key, "limit"), task_key, id)
end

-- limit_unplace takes task id, parked on its key, out of the key's wait
-- list (cancelled, deleted or archived by an operator).
local function limit_unplace(task_key, id)
	local l = redis.call("HGET", task_key, "limit")
	if l then
		local _, _, _, base = limit_parse(l)
		if redis.call("LREM", base .. ":wait", 1, id) > 0 then
			redis.call("ZREM", limit_queue(task_key, id) .. "parked", id)
		end
	end
end
