-- ack: settle a task that is done.
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] completed zset
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's RunSettle)
-- ARGV[2] task id
-- ARGV[3] fencing token
-- ARGV[4] completed retention in ms (0: forget the task at once)
--
-- Returns: 0 done (lib/forget.lua); 2 the caller does not hold the lease.
-- Complexity: O(log L), plus O(log C) with retention.
local now = now_ms()
local refused = check_settle(KEYS[1], ARGV[3], ARGV[1], now)
if refused then
	return refused
end
forget(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3], tonumber(ARGV[4]), now)
return 0
