-- ack: settle a task that is done.
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] completed zset
-- ARGV[1] task id
-- ARGV[2] fencing token
-- ARGV[3] completed retention in ms (0: forget the task at once)
--
-- Returns: 0 done (lib/forget.lua); 2 the caller does not hold the lease
-- (lib/fence.lua).
-- Complexity: O(log L), plus O(log C) with retention.
local now = now_ms()
if not holds(KEYS[1], ARGV[2], now) then
	return 2
end
forget(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[3]), now)
return 0
