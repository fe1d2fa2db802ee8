-- forget_batch: forget a batch handed over (hand_batch.lua) once its
-- aggregate is published (publish_handed.lua), and its members. Fenced by
-- the hand-over, not by a lease: any worker that published the aggregate
-- may finish it. Safe to run twice.
--
-- KEYS[1] batch hash   KEYS[2] the batch name's batches zset
-- KEYS[3] count of members (P .. "count")
-- ARGV[1] batch id   ARGV[2] task hash key prefix of the batch's queue
--
-- Returns: 0 forgotten, now or before; 2 the batch was not handed over.
-- Complexity: O(M) for M members, plus O(log B).
local handed = redis.call("HEXISTS", KEYS[1], "handed") == 1
if not handed then
	if redis.call("EXISTS", KEYS[1]) == 0 then
		return 0
	end
	return 2
end
agg_forget_batch(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
return 0
