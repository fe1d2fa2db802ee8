-- ack: settle a task that is done and, when asked, take the next task of
-- its queue for the slot it frees (lib/queue.lua's take_tasks), so that
-- the worker goes on without a fetch.
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] completed zset
-- with a take, KEYS[4] pending list   KEYS[5] paused flag
--         KEYS[6] notify list (unused: a settle's take wakes no one),
--         then optionally KEYS[7] rerouted set and
--         KEYS[8] the caller's names set (as dequeue.lua's KEYS[5..6])
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's RunSettle)
-- ARGV[2] task id
-- ARGV[3] fencing token
-- ARGV[4] completed retention in ms (0: forget the task at once)
-- with a take, ARGV[5] task hash key prefix   ARGV[6] lease duration in ms
--         ARGV[7] the fencing token of the task taken
--
-- Returns: 0 done (lib/forget.lua); 2 the caller does not hold the lease.
-- With a take, done is {0, expiry_ms} followed by the task taken as
-- dequeue.lua gives it, if one was; a run again that finds its first run
-- settled the task returns 0 and takes nothing (the first run's task, if
-- any, is the caller's to put back: release_fetch.lua).
-- Complexity: O(log L), plus O(log C) with retention, plus the take's.
local now = now_ms()
local refused, _, _, unique, limit = check_settle(KEYS[1], ARGV[3], ARGV[1], now)
if refused then
	return refused
end
forget(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3], tonumber(ARGV[4]), now, unique, limit)
if #KEYS < 6 then
	return 0
end
local expiry = now + tonumber(ARGV[6])
local out = {0, expiry}
take_tasks(out, 1, ARGV[5], KEYS[4], KEYS[5], KEYS[2], false, KEYS[7] or false, KEYS[8] or false, 7, now, expiry)
return out
