-- release_fetch: put back at the head of pending the tasks a fetch took
-- whose reply never reached the worker (the connection failed or timed
-- out): nobody runs them, and without this they would wait for their
-- leases to end. They are found by their fencing tokens, which begin with
-- the fetch's own random base, among the leases set or renewed since the
-- fetch began; nothing is counted against them. Safe to run twice, and
-- harmless if the fetch never ran (or runs after this: its tasks then
-- wait for their leases, as without it).
--
-- KEYS[1] pending list   KEYS[2] lease zset   KEYS[3] notify list
-- ARGV[1] task hash key prefix
-- ARGV[2] the fetch's token base
-- ARGV[3] the lowest lease expiry (ms) the fetch can have set
-- ARGV[4] the most leases to look at
--
-- Returns: how many tasks went back.
-- Complexity: O(L log L) for the L leases set or renewed since the fetch
-- began, at most ARGV[4].
local base = ARGV[2]
local ids = redis.call("ZRANGEBYSCORE", KEYS[2], ARGV[3], "+inf", "LIMIT", 0, tonumber(ARGV[4]))
local back = {}
for _, id in ipairs(ids) do
	local key = ARGV[1] .. id
	local h = redis.call("HMGET", key, "lease", "band")
	local token = h[1]
	if token and string.sub(token, 1, #base) == base then
		redis.call("ZREM", KEYS[2], id)
		limit_release(key, id)
		redis.call("HDEL", key, "lease", "lease_exp")
		redis.call("HSET", key, "state", "pending")
		table.insert(back, { id, h[2] })
	end
end
-- Backwards, so that they keep the order the fetch took them in.
for i = #back, 1, -1 do
	band_push(KEYS[1], back[i][2], back[i][1], true)
end
if #back > 0 then
	wake(KEYS[3])
end
return #back
