-- heartbeat: record a worker alive, and forget those whose heartbeat ran
-- out (at most 100 per call).
--
-- KEYS[1] alive zset (worker id → until when, ms)   KEYS[2] info hash
-- ARGV[1] worker id   ARGV[2] ttl in ms   ARGV[3] JSON WorkerInfo
--
-- Returns: the server's time, ms.
local now = now_ms()
redis.call("ZADD", KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call("HSET", KEYS[2], ARGV[1], ARGV[3])
local gone = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "LIMIT", 0, 100)
if #gone > 0 then
	redis.call("HDEL", KEYS[2], unpack(gone))
	redis.call("ZREM", KEYS[1], unpack(gone))
end
return now
