-- complete_batch: for the holder of a batch's lease only, publish the
-- aggregate built from it and forget the batch and its members, in one
-- step (lib/aggregate.lua). The aggregate is published as enqueue.lua
-- publishes a task, without its state (agg_publish): a task its queue
-- holds is refused and nothing changes. On Redis Cluster an
-- aggregate bound for another queue (another slot) is handed over instead:
-- hand_batch.lua, publish_handed.lua, forget_batch.lua.
--
-- KEYS[1] batch hash   KEYS[2] the batch name's batches zset
-- KEYS[3] count of members (P .. "count")
-- KEYS[4] the aggregate's task hash
-- KEYS[5] the aggregate queue's pending list   KEYS[6] scheduled zset
-- KEYS[7] archived zset   KEYS[8] notify list
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's
--         RunSettle)
-- ARGV[2] batch id
-- ARGV[3] fencing token (kept as the aggregate's publish token, pub)
-- ARGV[4] task hash key prefix of the batch's queue
-- ARGV[5] the aggregate's id   ARGV[6] its message (JSON signature)
-- ARGV[7] its ETA in ms since the epoch (0: now)
-- ARGV[8] its limit (lib/limit.lua; "" for none)
-- ARGV[9] its band (lib/band.lua; "" for none)
--
-- Returns: 0 done; 1 the aggregate's queue holds a task with its id; 2
-- the caller does not hold the lease.
-- Complexity: O(M) for M members, plus O(log B + log S).
local now = now_ms()
local refused = check_settle(KEYS[1], ARGV[3], ARGV[1], now)
if refused then
	return refused
end
if not agg_publish(KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8], ARGV[3], now, ARGV[9]) then
	return 1
end
agg_forget_batch(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[4])
return 0
