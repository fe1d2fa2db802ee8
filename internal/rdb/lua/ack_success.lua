-- ack_success: write a task's SUCCESS state and settle the task, atomically
-- and only for the lease holder. Used on a single Redis server, where the
-- state key may be touched by the same script (on Redis Cluster it lives in
-- another slot, and the worker writes the state, then acknowledges).
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] completed zset
-- KEYS[4] the task's state hash (result backend)
-- ARGV[1] task id
-- ARGV[2] fencing token
-- ARGV[3] completed retention in ms (0: forget the task at once)
-- ARGV[4] state TTL in ms
-- ARGV[5..] state field, value pairs (created_at is left as the PENDING
--           write set it)
--
-- Returns: 0 done; 2 the caller does not hold the lease (nothing written).
-- Complexity: O(log L), plus O(log C) with retention.
if redis.call("HGET", KEYS[1], "lease") ~= ARGV[2] then
	return 2
end
local fields = {}
for i = 5, #ARGV do
	table.insert(fields, ARGV[i])
end
redis.call("HSET", KEYS[4], unpack(fields))
redis.call("PEXPIRE", KEYS[4], ARGV[4])
redis.call("ZREM", KEYS[2], ARGV[1])
local keep = tonumber(ARGV[3])
if keep > 0 then
	local t = redis.call("TIME")
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	redis.call("HSET", KEYS[1], "state", "completed")
	redis.call("HDEL", KEYS[1], "lease")
	redis.call("PEXPIRE", KEYS[1], keep)
	redis.call("ZADD", KEYS[3], now + keep, ARGV[1])
else
	redis.call("DEL", KEYS[1])
end
return 0
