-- requeue_archived: move archived tasks back to pending, with their count
-- of recoveries reset (an operator decided to give them another chance).
-- A member of an aggregation group (its hash names the group) joins its
-- group again instead, in its first place (its join stamp; see
-- lib/aggregate.lua).
--
-- KEYS[1] archived zset   KEYS[2] pending list   KEYS[3] notify list
-- ARGV[1] task hash key prefix (the queue's aggregation keys are found
--         from it)
-- ARGV[2..] task ids; none means every archived task
--
-- Returns: how many tasks moved.
-- Complexity: O(N log A), plus O(log G) per member for G members of its
-- group.
local now = now_ms()
local ids = given_or_all(KEYS[1], 2)
local moved, ready = 0, false
local joined = {} -- groups joined, to file once
for _, id in ipairs(ids) do
	if redis.call("ZREM", KEYS[1], id) == 1 then
		local key = ARGV[1] .. id
		local task = redis.call("HMGET", key, "state", "group", "joined", "band")
		if task[1] then
			redis.call("HSET", key, "recovered", 0)
			if task[2] then
				agg_join(agg_prefix(ARGV[1]), task[2], key, id, tonumber(task[3]), now)
				joined[task[2]] = true
			else
				redis.call("HSET", key, "state", "pending")
				band_push(KEYS[2], task[4], id, false)
				ready = true
			end
			moved = moved + 1
		end
	end
end
agg_file(agg_prefix(ARGV[1]), joined, now)
if ready then
	wake(KEYS[3])
end
return moved
