-- archive: settle a task that is done for good without success, keeping it
-- as a dead letter, and trim the archive by age and size.
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] archived zset
-- ARGV[1] task id
-- ARGV[2] fencing token
-- ARGV[3] reason
-- ARGV[4] maximum age of dead letters in ms
-- ARGV[5] maximum number of dead letters
-- ARGV[6] task hash key prefix
--
-- Returns: 0 done; 2 the caller does not hold the lease (lib/fence.lua).
-- Complexity: O(log L + log A), plus O(T) for T dead letters trimmed.
local now = now_ms()
if not holds(KEYS[1], ARGV[2], now) then
	return 2
end
redis.call("ZREM", KEYS[2], ARGV[1])
redis.call("HDEL", KEYS[1], "lease", "lease_exp", "process_at", "outcome")
redis.call("HSET", KEYS[1], "state", "archived", "error", ARGV[3], "failed_at", now)
redis.call("ZADD", KEYS[3], now, ARGV[1])
local old = redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", now - tonumber(ARGV[4]))
for _, id in ipairs(old) do
	redis.call("DEL", ARGV[6] .. id)
end
redis.call("ZREMRANGEBYSCORE", KEYS[3], "-inf", now - tonumber(ARGV[4]))
local excess = redis.call("ZCARD", KEYS[3]) - tonumber(ARGV[5])
if excess > 0 then
	for _, id in ipairs(redis.call("ZRANGE", KEYS[3], 0, excess - 1)) do
		redis.call("DEL", ARGV[6] .. id)
	end
	redis.call("ZREMRANGEBYRANK", KEYS[3], 0, excess - 1)
end
return 0
