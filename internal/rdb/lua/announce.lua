-- announce: a worker with the given task names consumes this queue, for
-- the next ttl (reroute.lua sends tasks to the names announced).
--
-- KEYS[1] handlers hash (name → until when, in ms, a worker alive has it)
-- KEYS[2] the caller's names set (keyed by a digest of the names; workers
--         with the same names share it; dequeue.lua intersects it with the
--         rerouted names)
-- KEYS[3] name-keys prefix: KEYS[3] .. ":" .. name is a zset of the
--         digests whose names include name, by until when (ms) a worker
--         alive has announced them (reroute.lua wakes their workers)
-- ARGV[1] ttl in ms
-- ARGV[2] the digest of the names
-- ARGV[3..] the names
--
-- Returns: 0.
-- Complexity: O(N log D) for N names and D digests per name.
local ttl = tonumber(ARGV[1])
local now = now_ms()
local till = now + ttl
for i = 3, #ARGV do
	if (tonumber(redis.call("HGET", KEYS[1], ARGV[i])) or 0) < till then
		redis.call("HSET", KEYS[1], ARGV[i], till)
	end
	redis.call("SADD", KEYS[2], ARGV[i])
	local digests = KEYS[3] .. ":" .. ARGV[i]
	redis.call("ZADD", digests, till, ARGV[2])
	redis.call("ZREMRANGEBYSCORE", digests, "-inf", now)
	redis.call("PEXPIRE", digests, ttl)
end
if #ARGV >= 3 then
	redis.call("PEXPIRE", KEYS[2], ttl)
end
return 0
