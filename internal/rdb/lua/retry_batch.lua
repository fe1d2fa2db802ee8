-- retry_batch: for the holder of a batch's lease only, give the batch back
-- whole, to be taken again (claim_batch.lua) from a given time, after its
-- aggregator failed (lib/aggregate.lua).
--
-- KEYS[1] batch hash   KEYS[2] the batch name's batches zset
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's
--         RunSettle)
-- ARGV[2] batch id
-- ARGV[3] fencing token
-- ARGV[4] when it may be taken again, in ms since the epoch
-- ARGV[5] error message
--
-- Returns: 0 done; 2 the caller does not hold the lease, or the batch was
-- handed over (hand_batch.lua).
-- Complexity: O(log B).
local now = now_ms()
local refused = check_settle(KEYS[1], ARGV[3], ARGV[1], now)
if refused then
	return refused
end
if redis.call("HEXISTS", KEYS[1], "handed") == 1 then
	return 2 -- its aggregate is decided (hand_batch.lua): it is finished, not given back
end
redis.call("HDEL", KEYS[1], "lease", "lease_exp")
redis.call("HSET", KEYS[1], "error", ARGV[5], "settled", ARGV[3])
redis.call("HINCRBY", KEYS[1], "failed", 1)
redis.call("ZADD", KEYS[2], ARGV[4], ARGV[2])
-- The queue's key prefix: the batch hash's name less "agg:batch:" and the id.
due_at(string.sub(KEYS[1], 1, -(#ARGV[2] + 11)), tonumber(ARGV[4]))
return 0
