-- retry: settle a task that will run again later. A member of an
-- aggregation group (its hash names the group: one stranded by forward.lua)
-- retried at once joins its group again, as its newest member
-- (lib/aggregate.lua); later, forward.lua joins it.
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] retry zset
-- KEYS[4] pending list   KEYS[5] notify list
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's RunSettle)
-- ARGV[2] task id
-- ARGV[3] fencing token
-- ARGV[4] updated message (as enqueue.lua's)
-- ARGV[5] when to run again, in ms since the epoch (not in the future:
--         pending at once)
-- ARGV[6] error message
--
-- Returns: 0 done; 2 the caller does not hold the lease.
-- Complexity: O(log L + log R), plus O(log G) for a member of a group of G.
local now = now_ms()
local refused = check_settle(KEYS[1], ARGV[3], ARGV[1], now)
if refused then
	return refused
end
redis.call("ZREM", KEYS[2], ARGV[2])
limit_release(KEYS[1], ARGV[2])
redis.call("HDEL", KEYS[1], "lease", "lease_exp", "outcome")
redis.call("HSET", KEYS[1], "msg", ARGV[4], "error", ARGV[6], "failed_at", now, "settled", ARGV[3])
redis.call("HINCRBY", KEYS[1], "retried", 1)
if tonumber(ARGV[5]) > now then
	redis.call("HSET", KEYS[1], "state", "retry", "process_at", ARGV[5])
	redis.call("ZADD", KEYS[3], ARGV[5], ARGV[2])
	due_at(string.sub(KEYS[3], 1, -6), tonumber(ARGV[5])) -- the key's name less "retry"
else
	redis.call("HDEL", KEYS[1], "process_at")
	local h = redis.call("HMGET", KEYS[1], "group", "band")
	local g = h[1]
	if g then
		local P = agg_prefix(string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[2]))
		agg_join(P, g, KEYS[1], ARGV[2], nil, now)
		agg_file(P, { [g] = true }, now)
	else
		redis.call("HSET", KEYS[1], "state", "pending")
		band_push(KEYS[4], h[2], ARGV[2], false)
		wake(KEYS[5])
	end
end
return 0
