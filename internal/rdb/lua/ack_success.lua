-- ack_success: write a task's SUCCESS state and settle the task, atomically
-- and only for the lease holder. Used on a single Redis server, where the
-- state key may be touched by the same script (elsewhere the worker
-- commits, writes the state, then acknowledges).
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] completed zset
-- KEYS[4] the task's state hash (result backend)
-- ARGV[1] task id
-- ARGV[2] fencing token
-- ARGV[3] completed retention in ms (0: forget the task at once)
-- ARGV[4] state TTL in ms
-- ARGV[5..] state field, value pairs (created_at is left as the PENDING
--           write set it)
--
-- Returns: 0 done; 2 the caller does not hold the lease (nothing written).
-- Complexity: O(log L), plus O(log C) with retention.
local now = now_ms()
if not holds(KEYS[1], ARGV[2], now) then
	return 2
end
write_state(KEYS[4], ARGV[4], "", 5)
forget(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[3]), now)
return 0
