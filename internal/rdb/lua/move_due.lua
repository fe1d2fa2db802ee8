-- move_due: move the messages of machinery's delayed tasks (a sorted set
-- by ETA in ns) that are due to their queues: each to the list its
-- RoutingKey names (machinery's queues are lists of that name), or, with
-- none, the default queue's. A message moves only from the set it is in,
-- so two processes moving at once move it once. Safe to run twice.
--
-- KEYS[1] the delayed tasks' sorted set
-- ARGV[1] now, in ns   ARGV[2] the default queue
-- ARGV[3] how many due messages to move at most
--
-- Returns: how many it moved.
-- Complexity: O(M log D) for M messages moved out of D delayed.
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, tonumber(ARGV[3]))
for _, msg in ipairs(due) do
	local queue = ARGV[2]
	local ok, sig = pcall(cjson.decode, msg)
	if ok and type(sig) == "table" and type(sig.RoutingKey) == "string" and sig.RoutingKey ~= "" then
		queue = sig.RoutingKey
	end
	redis.call("RPUSH", queue, msg)
end
if #due > 0 then
	redis.call("ZREM", KEYS[1], unpack(due))
end
return #due
