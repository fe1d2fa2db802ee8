-- cancel: stop a task. A waiting one (pending, scheduled, retrying, or a
-- member waiting in its aggregation group) is deleted; a running one loses
-- its lease (out of the lease zset, its token cleared, so that its
-- worker's settle scripts are refused by lib/fence.lua) and is archived
-- with the reason, and the cancellation is published for the workers that
-- watch. A unique task frees its key.
--
-- KEYS[1] task hash       KEYS[2] pending list   KEYS[3] scheduled zset
-- KEYS[4] retry zset      KEYS[5] archived zset  KEYS[6] lease zset
-- KEYS[7] rerouted set (a name's list is KEYS[7] .. ":" .. name)
-- ARGV[1] task id   ARGV[2] reason
-- ARGV[3] maximum age of dead letters in ms   ARGV[4] their maximum number
-- ARGV[5] task hash key prefix (the queue's aggregation keys are found
--         from it)   ARGV[6] the channel cancellations are published on
--
-- Returns: {0, msg} a waiting task deleted; {3, msg} a running one
-- cancelled; {1} no such task; {2, state} it cannot be (archived,
-- completed, finishing: its outcome was committed, or batched: a member in
-- a batch being built).
-- Complexity: O(log S), plus O(N) for a pending task (LREM over the N
-- pending).
local now = now_ms()
local id = ARGV[1]
local t = redis.call("HMGET", KEYS[1], "state", "msg", "rerouted", "group", "outcome")
local state, msg, rerouted, g = t[1], t[2], t[3], t[4]
if not state then
	return {1}
end
if t[5] then
	return {2, "finishing"}
end
if state == "active" then
	redis.call("ZREM", KEYS[6], id)
	release_unique(KEYS[1], id)
	redis.call("HDEL", KEYS[1], "lease", "lease_exp", "process_at")
	redis.call("HSET", KEYS[1], "state", "archived", "error", ARGV[2], "failed_at", now)
	redis.call("ZADD", KEYS[5], now, id)
	trim_archive(KEYS[5], ARGV[5], now, tonumber(ARGV[3]), tonumber(ARGV[4]))
	redis.call("PUBLISH", ARGV[6], id)
	return {3, msg}
end
if state == "pending" or state == "scheduled" or state == "retry" then
	unplace(id, state, rerouted, KEYS[2], KEYS[3], KEYS[4], KEYS[7])
elseif state == "aggregating" and g then
	local P = agg_prefix(ARGV[5])
	if redis.call("ZREM", P .. "group:" .. g, id) == 0 then
		return {2, "batched"}
	end
	redis.call("DECR", P .. "count")
	agg_schedule(P, g)
else
	return {2, state}
end
release_unique(KEYS[1], id)
redis.call("DEL", KEYS[1])
-- A worker whose lease ran out may still run it (recovered since): told.
redis.call("PUBLISH", ARGV[6], id)
return {0, msg}
