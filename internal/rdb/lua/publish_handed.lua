-- publish_handed: publish the aggregate of a batch handed over from
-- another slot (hand_batch.lua) to its queue, once: the sent marker,
-- written with it, makes every later run a no-op, however many workers
-- finish the hand-over. It has no expiry until the batch is forgotten
-- (forget_batch.lua); then rdb's handOver gives it a few leases' life,
-- for a call still on its way. The aggregate is published as
-- complete_batch.lua publishes it (lib/aggregate.lua's agg_publish).
--
-- KEYS[1] sent marker (<prefix>:{<queue>}:agg:sent:<aggregate id>)
-- KEYS[2] the aggregate's task hash
-- KEYS[3] pending list   KEYS[4] scheduled zset   KEYS[5] archived zset
-- KEYS[6] notify list
-- ARGV[1] the aggregate's id   ARGV[2] its message (JSON signature)
-- ARGV[3] its ETA in ms since the epoch (0: now)
-- ARGV[4] its limit (lib/limit.lua; "" for none)
-- ARGV[5] publish token (kept as pub)
-- ARGV[6] its band (lib/band.lua; "" for none)
--
-- Returns: 0 published, now or before; 1 the queue holds another task
-- with the aggregate's id.
-- Complexity: O(log S) for S scheduled tasks.
if redis.call("EXISTS", KEYS[1]) == 1 then
	return 0
end
if not agg_publish(KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], now_ms(), ARGV[6]) then
	return 1
end
redis.call("SET", KEYS[1], "1")
return 0
