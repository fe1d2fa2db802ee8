-- forward: move scheduled and retry tasks whose time has come to pending.
--
-- KEYS[1] scheduled zset   KEYS[2] retry zset   KEYS[3] pending list
-- KEYS[4] notify list
-- ARGV[1] task hash key prefix
-- ARGV[2] the most tasks to move from each zset
--
-- Returns: {moved, next_ms}: how many moved, and when the earliest task
-- still waiting is due (-1: none).
-- Complexity: O(N log S) for N tasks moved.
local now = now_ms()
local moved = 0
for z = 1, 2 do
	local ids = redis.call("ZRANGEBYSCORE", KEYS[z], "-inf", now, "LIMIT", 0, tonumber(ARGV[2]))
	for _, id in ipairs(ids) do
		redis.call("ZREM", KEYS[z], id)
		local key = ARGV[1] .. id
		if redis.call("EXISTS", key) == 1 then
			redis.call("HSET", key, "state", "pending")
			redis.call("HDEL", key, "process_at")
			redis.call("RPUSH", KEYS[3], id)
			moved = moved + 1
		end
	end
end
if moved > 0 then
	wake(KEYS[4])
end
local nextDue = -1
for z = 1, 2 do
	local first = redis.call("ZRANGE", KEYS[z], 0, 0, "WITHSCORES")
	if first[2] then
		local score = tonumber(first[2])
		if nextDue < 0 or score < nextDue then
			nextDue = score
		end
	end
end
return {moved, nextDue}
