-- delete_archived: delete archived tasks.
--
-- KEYS[1] archived zset
-- ARGV[1] task hash key prefix
-- ARGV[2..] task ids; none means every archived task
--
-- Returns: how many tasks were deleted.
-- Complexity: O(N log A).
local ids = given_or_all(KEYS[1], 2)
local deleted = 0
for _, id in ipairs(ids) do
	if redis.call("ZREM", KEYS[1], id) == 1 then
		redis.call("DEL", ARGV[1] .. id)
		deleted = deleted + 1
	end
end
return deleted
