-- recover: return tasks whose lease expired to the head of pending (they
-- are the oldest work in the queue), or archive those recovered too often. The old lease token is removed, so the worker that
-- held it can no longer settle the task.
--
-- KEYS[1] lease zset   KEYS[2] pending list   KEYS[3] archived zset
-- KEYS[4] notify list
-- ARGV[1] task hash key prefix
-- ARGV[2] the most tasks to recover
-- ARGV[3] max recoveries (negative: never archive)
-- ARGV[4] archive reason prefix
--
-- Returns: {recovered_id1, ..., "|", archived_id1, ...}.
-- Complexity: O(N log L).
local now = now_ms()
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", now, "LIMIT", 0, tonumber(ARGV[2]))
local max = tonumber(ARGV[3])
local recovered, archived = {}, {}
for _, id in ipairs(ids) do
	redis.call("ZREM", KEYS[1], id)
	local key = ARGV[1] .. id
	if redis.call("EXISTS", key) == 1 then
		limit_release(key, id)
		local n = redis.call("HINCRBY", key, "recovered", 1)
		redis.call("HDEL", key, "lease", "lease_exp")
		if max >= 0 and n > max then
			redis.call("HSET", key, "state", "archived", "failed_at", now,
				"error", ARGV[4] .. " (recovered " .. (n - 1) .. " times; MaxRecoveries is " .. max .. ")")
			redis.call("ZADD", KEYS[3], now, id)
			release_unique(key, id)
			table.insert(archived, id)
		else
			redis.call("HSET", key, "state", "pending")
			band_push(KEYS[2], redis.call("HGET", key, "band"), id, true)
			table.insert(recovered, id)
		end
	end
end
if #recovered > 0 then
	wake(KEYS[4])
end
local out = recovered
table.insert(out, "|")
for _, id in ipairs(archived) do
	table.insert(out, id)
end
return out
