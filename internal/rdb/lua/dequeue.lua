-- dequeue: take up to N pending tasks of one queue under fresh leases.
--
-- KEYS[1] pending list   KEYS[2] paused flag   KEYS[3] lease zset
-- KEYS[4] notify list
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
-- Complexity: O(N log L) for L leased tasks.
local now = now_ms()
local expiry = now + tonumber(ARGV[3])
local out = {expiry}
if redis.call("EXISTS", KEYS[2]) == 1 then
	return out
end
local n = tonumber(ARGV[2])
for i = 1, n do
	local id = redis.call("LPOP", KEYS[1])
	if not id then
		break
	end
	local key = ARGV[1] .. id
	local token = ARGV[3 + i]
	local fields = redis.call("HMGET", key, "msg", "retried", "recovered", "outcome")
	if fields[1] then
		redis.call("HSET", key, "state", "active", "lease", token, "lease_exp", expiry)
		redis.call("ZADD", KEYS[3], expiry, id)
		table.insert(out, id)
		table.insert(out, fields[1])
		table.insert(out, fields[2] or "0")
		table.insert(out, fields[3] or "0")
		table.insert(out, token)
		table.insert(out, fields[4] or "")
	end
	-- An id without a hash was deleted while pending: skip it.
end
if redis.call("LLEN", KEYS[1]) > 0 then
	wake(KEYS[4])
end
return out
