-- commit: while the caller holds a task's lease, record its outcome in the
-- task, write its state, and record a group member's final state in its
-- group; all of it or, for a caller whose lease is gone, nothing. A final
-- outcome frees the task's unique key here, not at its acknowledgement or
-- archive: a send with the key is accepted once the final state shows
-- (on a Cluster, where the state is written after this, before it shows).
--
-- KEYS[1] task hash
-- KEYS[2] the task's state hash (optional: on a single server only)
-- KEYS[3] group hash   KEYS[4] done hash   KEYS[5] order list (optional: a
--         group member's final state)
-- ARGV[1] task id
-- ARGV[2] fencing token
-- ARGV[3] the outcome to record in the task (JSON TaskState); "" for none
-- ARGV[4] state TTL in ms
-- ARGV[5] created_at (RFC 3339), for a group that has none (a state's is
--         the task hash's at: when the task was sent)
-- ARGV[6] the group's task count
-- ARGV[7] TTL of a completed group in ms   ARGV[8] TTL of an unfinished one
-- ARGV[9..] state field, value pairs (with KEYS[2]), the first "state"
--          and the state: a final one is announced (lib/state.lua's
--          notify_final)
--
-- Returns: {0, finished}: done, and how many members of the group have
-- finished (0 without a group); {2}: the caller does not hold the lease.
-- Complexity: O(1).
local held, at, pub = holds(KEYS[1], ARGV[2], now_ms())
if not held then
	return {2}
end
if ARGV[3] ~= "" then
	redis.call("HSET", KEYS[1], "outcome", ARGV[3])
end
if ARGV[3] ~= "" or ARGV[10] == "SUCCESS" or ARGV[10] == "FAILURE" then
	release_unique(KEYS[1], ARGV[1])
end
local finished = 0
if #KEYS >= 2 then
	write_state(KEYS[2], ARGV[4], at, pub, "", { unpack(ARGV, 9) })
	notify_final(KEYS[2], ARGV[10])
end
if #KEYS >= 5 then
	finished = record_member(KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[3], ARGV[6], ARGV[5], ARGV[7], ARGV[8])
end
return {0, finished}
