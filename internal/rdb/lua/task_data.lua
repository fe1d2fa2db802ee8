-- task_data: keep what a running task writes (its checkpoint, its steps'
-- results, its progress) in its hash, while the caller holds its lease.
-- The fields survive a retry and a recovery (those scripts keep the
-- hash), and go with the hash when the task is acknowledged.
--
-- KEYS[1] task hash
-- ARGV[1] fencing token
-- ARGV[2..] field, value pairs (each field "x:" and a key)
--
-- Returns: 0 when written; 2 when the caller does not hold the lease.
-- Complexity: O(n) for n fields.
if not holds(KEYS[1], ARGV[1], now_ms()) then
	return 2
end
redis.call("HSET", KEYS[1], unpack(ARGV, 2))
return 0
