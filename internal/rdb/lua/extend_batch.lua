-- extend_batch: renew the lease of an aggregation batch for the holder of
-- its lease only (lib/aggregate.lua, lib/fence.lua's holds), as extend.lua
-- renews a task's.
--
-- KEYS[1] batch hash   KEYS[2] the batch name's batches zset
-- ARGV[1] batch id   ARGV[2] fencing token   ARGV[3] lease duration in ms
--
-- Returns: 0 renewed; 2 the caller does not hold the lease (it ran out,
-- and the batch may have been taken again, or it was settled).
-- Complexity: O(log B).
local now = now_ms()
if not holds(KEYS[1], ARGV[2], now) then
	return 2
end
local expiry = now + tonumber(ARGV[3])
redis.call("HSET", KEYS[1], "lease_exp", expiry)
redis.call("ZADD", KEYS[2], "XX", expiry, ARGV[1])
return 0
