-- reroute: settle a task whose name the caller has not registered by
-- handing it to the workers that have: it waits in its name's rerouted
-- list, pending, for a fetch whose names include it (dequeue.lua). Nothing
-- is counted against it.
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] handlers hash (name →
-- until when, in ms, a worker alive has announced it)
-- KEYS[4] rerouted set (names with rerouted tasks; each name's list is
-- KEYS[4] .. ":" .. name)   KEYS[5] notify list
-- KEYS[6] name-keys prefix (announce.lua: KEYS[6] .. ":" .. name is a
-- zset of the digests of the names sets that include name, by until when
-- their workers announced them)   KEYS[7] names prefix (the
-- workers of digest d wait on KEYS[7] .. d .. ":notify")
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's RunSettle)
-- ARGV[2] task id
-- ARGV[3] fencing token
-- ARGV[4] task name
--
-- Returns: 0 done; 2 the caller does not hold the lease; 3 no worker alive
-- has announced the name (nothing changed).
-- Complexity: O(log L + D) for D names sets that include the name.
local now = now_ms()
local refused = check_settle(KEYS[1], ARGV[3], ARGV[1], now)
if refused then
	return refused
end
if (tonumber(redis.call("HGET", KEYS[3], ARGV[4])) or 0) <= now then
	return 3
end
redis.call("ZREM", KEYS[2], ARGV[2])
limit_release(KEYS[1], ARGV[2])
redis.call("HDEL", KEYS[1], "lease", "lease_exp")
redis.call("HSET", KEYS[1], "state", "pending", "settled", ARGV[3], "rerouted", ARGV[4])
redis.call("RPUSH", KEYS[4] .. ":" .. ARGV[4], ARGV[2])
redis.call("SADD", KEYS[4], ARGV[4])
-- Wake a worker that has the name; the queue's own token may go to one
-- that has not.
local digests = redis.call("ZRANGEBYSCORE", KEYS[6] .. ":" .. ARGV[4], now, "+inf", "WITHSCORES")
for i = 1, #digests, 2 do
	local notify = KEYS[7] .. digests[i] .. ":notify"
	wake(notify)
	-- The list goes with its workers' announcement.
	redis.call("PEXPIREAT", notify, digests[i + 1])
end
return 0
