-- state_unless_final: write a state that is not final (STARTED, RETRY,
-- RECEIVED) unless the task's state hash already holds a final one
-- (SUCCESS, FAILURE), so that a write landing late (from a worker paused
-- past its lease, on Redis Cluster where the state is not in the queue's
-- slot and the lease cannot fence it) never hides a result.
--
-- KEYS[1] the task's state hash
-- ARGV[1] state TTL in ms
-- ARGV[2] created_at (ms since the epoch), for a state hash that has none
-- ARGV[3..] state field, value pairs
--
-- Returns: 1 written; 0 the state is final, nothing written.
-- Complexity: O(1).
local current = redis.call("HGET", KEYS[1], "state")
if current == "SUCCESS" or current == "FAILURE" then
	return 0
end
write_state(KEYS[1], ARGV[1], false, ARGV[2], { unpack(ARGV, 3) })
return 1
