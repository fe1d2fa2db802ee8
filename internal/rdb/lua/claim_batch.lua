-- claim_batch: take one batch of the caller's task names under a fresh
-- lease (lib/aggregate.lua): the batch whose lease ended, or whose retry
-- came, the earliest, taken again whole (same id and members;
-- recovered+1 when its lease ended unsettled); else the oldest members,
-- up to the name's MaxSize (every one without it), of the group due the
-- earliest, as a new batch. A group the due index holds early is filed
-- again at its true time (lib/aggregate.lua) and passed over. With more
-- due, it wakes another worker.
--
-- KEYS[1] policies hash (P .. "policies")   KEYS[2] groups set (P .. "groups")
-- KEYS[3] the queue's paused flag (a paused queue's batches wait, as its
-- pending tasks do)
-- ARGV[1] aggregation prefix P ("<prefix>:{<queue>}:agg:")
-- ARGV[2] task hash key prefix
-- ARGV[3] lease duration in ms
-- ARGV[4] fencing token
-- ARGV[5] the id of a new batch
-- ARGV[6..] the caller's task names
--
-- Returns: {} when nothing is due; else {id, name, key, token, lease_exp,
-- failed, recovered, handed (the message of the aggregate handed over to
-- another slot, hand_batch.lua, else ""), then for each member, oldest
-- first: id, msg ("" for a member whose hash is gone)}. The lease expiry is the server's time
-- plus the duration.
-- Complexity: O(N log B) for N names and B batches or groups per name,
-- plus O(M log G) for M members taken from a group of G.
if redis.call("EXISTS", KEYS[3]) == 1 then
	return {}
end
local now = now_ms()
local P = ARGV[1]
local token = ARGV[4]
local expiry = now + tonumber(ARGV[3])

-- earliest returns the name and member of the first entry, due by now,
-- of the zsets prefix .. name for the caller's names, the earliest.
local function earliest(prefix)
	local best_name, best_member, best_score
	for i = 6, #ARGV do
		local first = redis.call("ZRANGE", prefix .. ARGV[i], 0, 0, "WITHSCORES")
		if first[2] then
			local score = tonumber(first[2])
			if score <= now and (not best_score or score < best_score) then
				best_name, best_member, best_score = ARGV[i], first[1], score
			end
		end
	end
	return best_name, best_member
end

-- reply is a claim's reply. When more of the caller's groups or batches
-- are due, it wakes their workers (lib/aggregate.lua's agg_wake): a busy
-- queue's batches are built by as many workers as are idle.
local function reply(id, name, key, failed, recovered, handed, ids)
	local more = earliest(P .. "batches:") or earliest(P .. "due:")
	if more then
		agg_wake(P, more)
	end
	local out = { id, name, key, token, expiry, failed, recovered, handed or "" }
	for _, m in ipairs(ids) do
		table.insert(out, m)
		table.insert(out, redis.call("HGET", ARGV[2] .. m, "msg") or "")
	end
	return out
end

while true do
	local name, id = earliest(P .. "batches:")
	if not name then
		break
	end
	local batch = P .. "batch:" .. id
	local b = redis.call("HMGET", batch, "key", "msg", "lease", "failed", "recovered", "handed")
	if b[2] then
		local recovered = tonumber(b[5]) or 0
		if b[3] then -- a lease ended unsettled; a retry clears it
			recovered = redis.call("HINCRBY", batch, "recovered", 1)
		end
		redis.call("HSET", batch, "lease", token, "lease_exp", expiry)
		redis.call("ZADD", P .. "batches:" .. name, expiry, id)
		due_at(string.sub(P, 1, -5), expiry)
		return reply(id, name, b[1], tonumber(b[4]) or 0, recovered, b[6], cjson.decode(b[2]))
	end
	redis.call("ZREM", P .. "batches:" .. name, id) -- no such batch
end

while true do
	local name, key = earliest(P .. "due:")
	if not name then
		return {}
	end
	local g = name .. "\n" .. key
	local policy = agg_policy(P, name)
	-- The index may hold a group early (lib/aggregate.lua): filed again
	-- at its true time, it is taken only when that has come.
	local due = agg_schedule(P, g, policy, now)
	if due and due <= now then
		local n = policy.size
		if n == 0 then
			n = redis.call("ZCARD", P .. "group:" .. g)
		end
		local popped = redis.call("ZPOPMIN", P .. "group:" .. g, n)
		agg_schedule(P, g, policy, now) -- more due now: reply wakes another worker
		local ids = {}
		for i = 1, #popped, 2 do
			table.insert(ids, popped[i])
		end
		local id = ARGV[5]
		redis.call("HSET", P .. "batch:" .. id, "name", name, "key", key, "msg", cjson.encode(ids),
			"lease", token, "lease_exp", expiry, "failed", 0, "recovered", 0)
		redis.call("ZADD", P .. "batches:" .. name, expiry, id)
		due_at(string.sub(P, 1, -5), expiry)
		return reply(id, name, key, 0, 0, "", ids)
	end
end
