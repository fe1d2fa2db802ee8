-- set_state: write a task's state other than PENDING through the backend
-- (SetState*, outside a lease). A state that is not final (STARTED, RETRY,
-- RECEIVED) is written only unless the task's state hash already holds a
-- final one (SUCCESS, FAILURE), so that a write landing late (from a
-- worker paused past its lease, on Redis Cluster where the state is not in
-- the queue's slot and the lease cannot fence it) never hides a result.
--
-- KEYS[1] the task's state hash
-- KEYS[2] the task's hash in its queue (optional: on a single server
--         only), whose at (when the task was sent; for an aggregation
--         member, when it joined its group) is the state's created_at, and
--         whose pub (the token of the publish that sent it) the state keeps
--         (enqueue.lua's ran_since)
-- ARGV[1] state TTL in ms
-- ARGV[2] created_at (ms since the epoch), for a state hash that has none
--         when the task hash has no at
-- ARGV[3] "1" to announce a final state (lib/state.lua's notify_final;
--         a single server only)
-- ARGV[4..] state field, value pairs, the first "state" and the state
--
-- Returns: 1 written; 0 the state is final, nothing written.
-- Complexity: O(1).
local state = ARGV[5]
local final = state == "SUCCESS" or state == "FAILURE"
if not final then
	local current = redis.call("HGET", KEYS[1], "state")
	if current == "SUCCESS" or current == "FAILURE" then
		return 0
	end
end
local at, pub = false, false
if KEYS[2] then
	local t = redis.call("HMGET", KEYS[2], "at", "joined", "pub")
	at, pub = sent_at(t[1], t[2]), t[3]
end
write_state(KEYS[1], ARGV[1], at, pub, ARGV[2], { unpack(ARGV, 4) })
if ARGV[3] == "1" then
	notify_final(KEYS[1], state)
end
return 1
