-- archive: settle a task that is done for good without success, keeping it
-- as a dead letter, and trim the archive by age and size.
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] archived zset
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's RunSettle)
-- ARGV[2] task id
-- ARGV[3] fencing token
-- ARGV[4] reason
-- ARGV[5] maximum age of dead letters in ms
-- ARGV[6] maximum number of dead letters
-- ARGV[7] task hash key prefix
--
-- Returns: 0 done; 2 the caller does not hold the lease.
-- Complexity: O(log L + log A), plus O(T) for T dead letters trimmed.
local now = now_ms()
local refused = check_settle(KEYS[1], ARGV[3], ARGV[1], now)
if refused then
	return refused
end
release_holds(KEYS[1], ARGV[2])
redis.call("ZREM", KEYS[2], ARGV[2])
redis.call("HDEL", KEYS[1], "lease", "lease_exp", "process_at", "outcome")
redis.call("HSET", KEYS[1], "state", "archived", "error", ARGV[4], "failed_at", now, "settled", ARGV[3])
redis.call("ZADD", KEYS[3], now, ARGV[2])
trim_archive(KEYS[3], ARGV[7], now, tonumber(ARGV[5]), tonumber(ARGV[6]))
return 0
