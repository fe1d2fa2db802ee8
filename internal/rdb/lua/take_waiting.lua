-- take_waiting: an operator's action on a task that waits in its queue
-- (pending, scheduled, retrying, or parked on its limit key): "delete" it (it never runs; a unique
-- task frees its key), "archive" it with a reason, or "run" it now (a
-- scheduled or retrying task becomes pending at the head of its band's list; a
-- member of an aggregation group (its hash names the group) joins it; a
-- pending task stays as it is).
--
-- KEYS[1] task hash       KEYS[2] pending list   KEYS[3] scheduled zset
-- KEYS[4] retry zset      KEYS[5] archived zset  KEYS[6] notify list
-- KEYS[7] rerouted set (a name's list is KEYS[7] .. ":" .. name)
-- ARGV[1] task id   ARGV[2] "delete", "archive" or "run"
-- ARGV[3] the reason (archive)
-- ARGV[4] maximum age of dead letters in ms   ARGV[5] their maximum number
-- ARGV[6] task hash key prefix (the queue's aggregation keys are found
--         from it)
--
-- Returns: {0, msg} done (msg: the task's message); {1} no such task;
-- {2, state} the task does not wait (its state: active, archived,
-- aggregating, completed, or finishing: recovered after its outcome was
-- committed).
-- Complexity: O(log S) for a scheduled or retrying task; O(N) for a
-- pending one (LREM over the N pending of its band).
local now = now_ms()
local id, action = ARGV[1], ARGV[2]
local task = redis.call("HMGET", KEYS[1], "state", "msg", "rerouted", "group", "outcome", "band")
local state, msg, rerouted, g = task[1], task[2], task[3], task[4]
if not state then
	return {1}
end
if state ~= "pending" and state ~= "scheduled" and state ~= "retry" and state ~= "limited" then
	return {2, state}
end
if task[5] then
	-- Recovered after an earlier holder committed its outcome: it is
	-- being finished, not waiting to run.
	return {2, "finishing"}
end
if action == "run" and (state == "pending" or state == "limited") then
	return {0, msg}
end

-- Out of its place.
unplace(KEYS[1], id, state, rerouted, KEYS[2], KEYS[3], KEYS[4], KEYS[7], task[6])
local P = g and action == "run" and agg_prefix(ARGV[6])
take_out(KEYS[1], id, action, g, task[6], true, ARGV[3], now, KEYS[2], KEYS[5], P)
if action == "archive" then
	trim_archive(KEYS[5], ARGV[6], now, tonumber(ARGV[4]), tonumber(ARGV[5]))
elseif action == "run" and g then
	agg_file(P, { [g] = true }, now)
elseif action == "run" then
	wake(KEYS[6])
end
return {0, msg}
