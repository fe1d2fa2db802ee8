-- workers: list the workers alive.
--
-- KEYS[1] alive zset (worker id → until when, ms)   KEYS[2] info hash
--
-- Returns: {id1, until1, json1, id2, ...}; a worker whose info is missing
-- has json false.
local now = now_ms()
local alive = redis.call("ZRANGEBYSCORE", KEYS[1], "(" .. now, "+inf", "WITHSCORES")
local out = {}
for i = 1, #alive, 2 do
	table.insert(out, alive[i])
	table.insert(out, alive[i + 1])
	table.insert(out, redis.call("HGET", KEYS[2], alive[i]))
end
return out
