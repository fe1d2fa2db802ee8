-- requeue_archived: move archived tasks back to pending, with their count
-- of recoveries reset (an operator decided to give them another chance).
--
-- KEYS[1] archived zset   KEYS[2] pending list   KEYS[3] notify list
-- ARGV[1] task hash key prefix
-- ARGV[2..] task ids; none means every archived task
--
-- Returns: how many tasks moved.
-- Complexity: O(N log A).
local ids = given_or_all(KEYS[1], 2)
local moved = 0
for _, id in ipairs(ids) do
	if redis.call("ZREM", KEYS[1], id) == 1 then
		local key = ARGV[1] .. id
		if redis.call("EXISTS", key) == 1 then
			redis.call("HSET", key, "state", "pending", "recovered", 0)
			redis.call("RPUSH", KEYS[2], id)
			moved = moved + 1
		end
	end
end
if moved > 0 then
	wake(KEYS[3])
end
return moved
