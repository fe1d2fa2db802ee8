-- cancel: stop a task. A waiting one (pending, scheduled, retrying,
-- parked on its limit key, or a member waiting in its aggregation group)
-- is deleted; a running one loses
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
-- ARGV[7] bar in ms: with a bar, a task the queue does not hold (a task of
--         a cancelled workflow not sent yet) is kept out for that long: its
--         hash is written in state "cancelled" with the reason as error
--         and expires then (so is a waiting task's, once deleted);
--         enqueue.lua refuses it ({7, id, reason}) and
--         ack_success.lua does not send it (lib/queue.lua's held).
--
-- Returns: {0, msg} a waiting task deleted; {3, msg} a running one
-- cancelled; {1} no such task; {4} no such task, kept out now; {2, state}
-- it cannot be (archived, completed, finishing: its outcome was
-- committed, batched: a member in a batch being built, or cancelled: kept
-- out).
-- Complexity: O(log S), plus O(N) for a pending task (LREM over the N
-- pending of its band).
local now = now_ms()
local id = ARGV[1]
local t = redis.call("HMGET", KEYS[1], "state", "msg", "rerouted", "group", "outcome", "at", "joined", "band")
local state, msg, rerouted, g = t[1], t[2], t[3], t[4]
if not state then
	local bar = tonumber(ARGV[7])
	if bar > 0 then
		redis.call("HSET", KEYS[1], "state", "cancelled", "error", ARGV[2])
		redis.call("PEXPIRE", KEYS[1], bar)
		return {4}
	end
	return {1}
end
if t[5] then
	return {2, "finishing"}
end
if state == "active" then
	redis.call("ZREM", KEYS[6], id)
	release_holds(KEYS[1], id)
	redis.call("HDEL", KEYS[1], "lease", "lease_exp", "process_at")
	redis.call("HSET", KEYS[1], "state", "archived", "error", ARGV[2], "failed_at", now)
	redis.call("ZADD", KEYS[5], now, id)
	trim_archive(KEYS[5], ARGV[5], now, tonumber(ARGV[3]), tonumber(ARGV[4]))
	redis.call("PUBLISH", ARGV[6], id)
	return {3, msg}
end
if state == "pending" or state == "scheduled" or state == "retry" or state == "limited" then
	unplace(KEYS[1], id, state, rerouted, KEYS[2], KEYS[3], KEYS[4], KEYS[7], t[8])
	limit_pass(KEYS[1], id)
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
if tonumber(ARGV[7]) > 0 then
	-- The marker keeps when the task was sent (for an aggregation member,
	-- when it joined its group): its FAILURE's created_at (set_state.lua),
	-- and the sign, for get_state.lua, of a task that was sent.
	local at = sent_at(t[6], t[7])
	if at then
		redis.call("HSET", KEYS[1], "state", "cancelled", "error", ARGV[2], "at", at)
	else
		redis.call("HSET", KEYS[1], "state", "cancelled", "error", ARGV[2])
	end
	redis.call("PEXPIRE", KEYS[1], ARGV[7])
end
-- A worker whose lease ran out may still run it (recovered since): told.
redis.call("PUBLISH", ARGV[6], id)
return {0, msg}
