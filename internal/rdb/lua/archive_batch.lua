-- archive_batch: for the holder of a batch's lease only, keep each of its
-- members as a dead letter of its queue with a reason, as archive.lua
-- keeps a task (their hashes still name their group: requeued, they join
-- it again), forget the batch, and trim the archive by age and size.
--
-- KEYS[1] batch hash   KEYS[2] the batch name's batches zset
-- KEYS[3] count of members (P .. "count")   KEYS[4] archived zset
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's
--         RunSettle)
-- ARGV[2] batch id
-- ARGV[3] fencing token
-- ARGV[4] reason
-- ARGV[5] maximum age of dead letters in ms
-- ARGV[6] maximum number of dead letters
-- ARGV[7] task hash key prefix
--
-- Returns: 0 done; 2 the caller does not hold the lease, or the batch was
-- handed over (hand_batch.lua).
-- Complexity: O(M log A) for M members, plus O(T) for T dead letters
-- trimmed.
local now = now_ms()
local refused = check_settle(KEYS[1], ARGV[3], ARGV[1], now)
if refused then
	return refused
end
if redis.call("HEXISTS", KEYS[1], "handed") == 1 then
	return 2 -- its aggregate is decided (hand_batch.lua): it is finished, not given back
end
local ids = cjson.decode(redis.call("HGET", KEYS[1], "msg"))
for _, id in ipairs(ids) do
	local key = ARGV[7] .. id
	if redis.call("EXISTS", key) == 1 then
		redis.call("HSET", key, "state", "archived", "error", ARGV[4], "failed_at", now, "settled", ARGV[3])
		redis.call("ZADD", KEYS[4], now, id)
	end
end
redis.call("DECRBY", KEYS[3], #ids)
redis.call("ZREM", KEYS[2], ARGV[2])
redis.call("DEL", KEYS[1])
trim_archive(KEYS[4], ARGV[7], now, tonumber(ARGV[5]), tonumber(ARGV[6]))
return 0
