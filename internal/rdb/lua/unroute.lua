-- unroute: put back at the head of pending the rerouted tasks of names no
-- worker alive has announced any more, at most a batch per call, and
-- forget expired announcements. Run by the queue's maintainer with the
-- recoverer.
--
-- KEYS[1] rerouted set (each name's list is KEYS[1] .. ":" .. name)
-- KEYS[2] handlers hash   KEYS[3] pending list   KEYS[4] notify list
-- ARGV[1] task hash key prefix
-- ARGV[2] the most tasks to put back
--
-- Returns: {moved, more}: the number of tasks put back, and 1 when tasks
-- to put back remain (call again), else 0.
-- Complexity: O(N + R + H) for N tasks put back, R names with rerouted
-- tasks and H names announced.
local now = now_ms()
local limit = tonumber(ARGV[2])
local moved = 0
local more = 0
for _, name in ipairs(redis.call("SMEMBERS", KEYS[1])) do
	if (tonumber(redis.call("HGET", KEYS[2], name)) or 0) <= now then
		if moved >= limit then
			more = 1
			break
		end
		local list = KEYS[1] .. ":" .. name
		local ids = redis.call("LRANGE", list, 0, limit - moved - 1)
		-- Backwards, so that they keep their order at the head.
		for i = #ids, 1, -1 do
			redis.call("HDEL", ARGV[1] .. ids[i], "rerouted")
			band_push(KEYS[3], redis.call("HGET", ARGV[1] .. ids[i], "band"), ids[i], true)
		end
		redis.call("LTRIM", list, #ids, -1)
		moved = moved + #ids
		if redis.call("LLEN", list) == 0 then
			redis.call("SREM", KEYS[1], name)
		else
			more = 1
		end
	end
end
local handlers = redis.call("HGETALL", KEYS[2])
for i = 1, #handlers, 2 do
	if tonumber(handlers[i + 1]) <= now then
		redis.call("HDEL", KEYS[2], handlers[i])
	end
end
if moved > 0 then
	wake(KEYS[4])
end
return {moved, more}
