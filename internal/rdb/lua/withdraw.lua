-- withdraw: delete the PENDING state a send wrote for a task it then did
-- not publish (its error said so), unless another write has replaced it
-- since: a worker's, or another send's of a task with the same id that
-- names another workflow. Sent in a pipeline after the send's own writes,
-- with the script's body (EVAL): it runs on the rare failed send, and
-- needs no loading first.
--
-- KEYS[1] the task's state hash
-- ARGV[1] the workflow the send's PENDING state names (its "workflow"
--         field), "" for none
--
-- Returns 1 when it deleted the state, else 0 (no state, a state that is
-- not PENDING, or one that names another workflow).
-- Complexity: O(1).
local s = redis.call("HMGET", KEYS[1], "state", "workflow")
if s[1] ~= "PENDING" or (s[2] or "") ~= ARGV[1] then
	return 0
end
redis.call("DEL", KEYS[1])
return 1
