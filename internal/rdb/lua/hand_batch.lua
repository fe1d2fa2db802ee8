-- hand_batch: for the holder of a batch's lease only, record the
-- aggregate built from the batch (lib/aggregate.lua) as handed over to
-- its queue, which is in another slot of a Redis Cluster: from here on the
-- batch is neither retried, archived nor stranded, and whoever takes it
-- again (claim_batch.lua returns the aggregate) finishes the hand-over,
-- publishing the aggregate (publish_handed.lua, once) and forgetting the
-- batch (forget_batch.lua), without building it again. A batch handed
-- before keeps its first aggregate. Every finisher runs it first, as the
-- fence of the steps after it: a forgotten batch, or one whose lease the
-- caller lost, refuses it.
--
-- KEYS[1] batch hash
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's
--         RunSettle)
-- ARGV[2] fencing token
-- ARGV[3] the aggregate's message (JSON signature)
--
-- Returns: 0 done; 2 the caller does not hold the lease.
-- Complexity: O(1).
-- A run again after a lost reply needs no more: the lease is still held
-- (the batch is forgotten only after a later step).
local refused = check_settle(KEYS[1], ARGV[2], ARGV[1], now_ms())
if refused then
	return refused
end
redis.call("HSETNX", KEYS[1], "handed", ARGV[3])
return 0
