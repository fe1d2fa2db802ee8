-- requeue: put taken but unfinished tasks back at the head of pending, as
-- at shutdown; nothing is counted against them.
--
-- KEYS[1] pending list   KEYS[2] lease zset   KEYS[3] notify list
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's settled_by; see rdb's RunSettle)
-- ARGV[2] task hash key prefix
-- ARGV[3..] pairs: task id, fencing token
--
-- Returns: {lost_id1, ...}, the ids whose lease the caller did not hold
-- (left alone).
-- Complexity: O(N log L).
local now = now_ms()
local lost = {}
local moved = 0
-- Walk backwards so that the tasks keep their order at the head.
for i = #ARGV - 1, 3, -2 do
	local id, token = ARGV[i], ARGV[i + 1]
	local key = ARGV[2] .. id
	if holds(key, token, now) then
		redis.call("ZREM", KEYS[2], id)
		limit_release(key, id)
		redis.call("HDEL", key, "lease", "lease_exp")
		redis.call("HSET", key, "state", "pending", "settled", token)
		band_push(KEYS[1], redis.call("HGET", key, "band"), id, true)
		moved = moved + 1
	elseif not (ARGV[1] == "1" and settled_by(key, token)) then
		table.insert(lost, id)
	end
end
if moved > 0 then
	wake(KEYS[3])
end
return lost
