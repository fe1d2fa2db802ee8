-- extend: renew the leases of active tasks of one queue.
--
-- KEYS[1] lease zset
-- ARGV[1] task hash key prefix
-- ARGV[2] lease duration in ms
-- ARGV[3..] pairs: task id, fencing token
--
-- Returns: {expiry_ms, lost_id1, lost_id2, ...}: the new expiry, and the ids
-- whose lease the caller no longer holds (expired, recovered and possibly
-- leased to another worker, or settled; lib/fence.lua).
-- Complexity: O(N log L).
local now = now_ms()
local expiry = now + tonumber(ARGV[2])
local out = {expiry}
for i = 3, #ARGV, 2 do
	local id, token = ARGV[i], ARGV[i + 1]
	local key = ARGV[1] .. id
	if holds(key, token, now) then
		redis.call("ZADD", KEYS[1], "XX", expiry, id)
		redis.call("HSET", key, "lease_exp", expiry)
	else
		table.insert(out, id)
	end
end
return out
