-- ack: settle a task that is done.
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] completed zset
-- ARGV[1] task id
-- ARGV[2] fencing token
-- ARGV[3] completed retention in ms (0: forget the task at once)
--
-- Returns: 0 done; 2 the caller does not hold the lease (lib/fence.lua).
-- Complexity: O(log L), plus O(log C) with retention.
local now = now_ms()
if not holds(KEYS[1], ARGV[2], now) then
	return 2
end
redis.call("ZREM", KEYS[2], ARGV[1])
local keep = tonumber(ARGV[3])
if keep > 0 then
	redis.call("HSET", KEYS[1], "state", "completed")
	redis.call("HDEL", KEYS[1], "lease", "lease_exp", "outcome")
	redis.call("PEXPIRE", KEYS[1], keep)
	redis.call("ZADD", KEYS[3], now + keep, ARGV[1])
else
	redis.call("DEL", KEYS[1])
end
return 0
