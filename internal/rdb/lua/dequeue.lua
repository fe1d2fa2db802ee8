-- dequeue: take up to N pending tasks of one queue under fresh leases:
-- first tasks rerouted to the caller's names (reroute.lua), then the
-- pending list. A limited task (its hash's limit) over its key's
-- concurrency is parked on its key, one over its rate scheduled at the
-- slot it books (lib/limit.lua's limit_admit); either way it is not
-- taken, and its token is not used.
--
-- KEYS[1] pending list   KEYS[2] paused flag   KEYS[3] lease zset
-- KEYS[4] notify list
-- KEYS[5] rerouted set (each name's list is KEYS[5] .. ":" .. name) and
-- KEYS[6] the caller's names set (announce.lua): both or neither; without
-- them no rerouted task is taken.
-- ARGV[1] task hash key prefix
-- ARGV[2] N, the most tasks to take
-- ARGV[3] lease duration in ms
-- ARGV[4..] N fencing tokens, one per task taken
--
-- Returns: {expiry_ms, id1, msg1, retried1, recovered1, token1, outcome1,
-- id2, ...} (outcome: what an earlier holder committed, "" for none); just
-- {expiry_ms} when the queue is paused or empty. The lease expiry is the
-- server's time plus the duration. When tasks remain pending, a wake-up
-- token is left for the next idle worker.
-- Complexity: O(N log L) for L leased tasks, plus O(R) for R names with
-- rerouted tasks when there are any.
local now = now_ms()
local expiry = now + tonumber(ARGV[3])
local out = {expiry}
if redis.call("EXISTS", KEYS[2]) == 1 then
	return out
end
local n = tonumber(ARGV[2])
local used = 0 -- tokens handed out; one per id popped
-- take leases the task id, and reports whether it did.
local function take(id)
	used = used + 1
	local key = ARGV[1] .. id
	local token = ARGV[3 + used]
	local fields = redis.call("HMGET", key, "msg", "retried", "recovered", "outcome", "limit")
	-- An id without a hash was deleted while pending: skip it.
	if not fields[1] then
		return false
	end
	-- A limited task over its limit is put aside (lib/limit.lua).
	if fields[5] and not fields[4] and not limit_admit(fields[5], key, id, KEYS[3], now) then
		redis.call("HDEL", key, "rerouted")
		return false
	end
	redis.call("HSET", key, "state", "active", "lease", token, "lease_exp", expiry)
	redis.call("ZADD", KEYS[3], expiry, id)
	table.insert(out, id)
	table.insert(out, fields[1])
	table.insert(out, fields[2] or "0")
	table.insert(out, fields[3] or "0")
	table.insert(out, token)
	table.insert(out, fields[4] or "")
	return true
end
if #KEYS >= 6 and redis.call("EXISTS", KEYS[5]) == 1 then
	for _, name in ipairs(redis.call("SINTER", KEYS[5], KEYS[6])) do
		local list = KEYS[5] .. ":" .. name
		while used < n do
			local id = redis.call("LPOP", list)
			if not id then
				break
			end
			if take(id) then
				redis.call("HDEL", ARGV[1] .. id, "rerouted")
			end
		end
		if redis.call("LLEN", list) == 0 then
			redis.call("SREM", KEYS[5], name)
		elseif used >= n then
			-- Tasks of the caller's names remain: wake another of its kind.
			local notify = KEYS[6] .. ":notify"
			wake(notify)
			local ttl = redis.call("PTTL", KEYS[6])
			if ttl > 0 then
				redis.call("PEXPIRE", notify, ttl)
			end
		end
		if used >= n then
			break
		end
	end
end
while used < n do
	local id = redis.call("LPOP", KEYS[1])
	if not id then
		break
	end
	take(id)
end
if redis.call("LLEN", KEYS[1]) > 0 then
	wake(KEYS[4])
end
return out
