-- forward: move scheduled and retry tasks whose time has come to pending;
-- a member of an aggregation group (its hash names the group) joins its
-- group instead, filed by its name's last announced policy (never due
-- without one; lib/aggregate.lua). Run by the queue's elected
-- maintainer, it also wakes the aggregating workers of each task name
-- with a group or batch due, so that no worker polls for due groups.
--
-- KEYS[1] scheduled zset   KEYS[2] retry zset   KEYS[3] pending list
-- KEYS[4] notify list      KEYS[5] the queue's paused flag (a paused
--                            queue's workers are not woken for its
--                            batches, which they would not take)
-- ARGV[1] task hash key prefix (the queue's aggregation keys are found
--         from it)
-- ARGV[2] the most tasks to move from each zset
--
-- Returns: {moved, next_ms}: how many moved, and when the earliest task,
-- group or batch still waiting is due (-1: none).
-- Complexity: O(N log S) for N tasks moved, plus O(A log G) for the A
-- task names ever aggregated on the queue.
local now = now_ms()
local moved, ready = 0, false
local joined = {} -- groups joined, to file once
for z = 1, 2 do
	local ids = redis.call("ZRANGEBYSCORE", KEYS[z], "-inf", now, "LIMIT", 0, tonumber(ARGV[2]))
	for _, id in ipairs(ids) do
		redis.call("ZREM", KEYS[z], id)
		local key = ARGV[1] .. id
		local task = redis.call("HMGET", key, "state", "group")
		if task[1] then
			redis.call("HDEL", key, "process_at")
			if task[2] then
				agg_join(agg_prefix(ARGV[1]), task[2], key, id, nil, now)
				joined[task[2]] = true
			else
				redis.call("HSET", key, "state", "pending")
				redis.call("RPUSH", KEYS[3], id)
				ready = true
			end
			moved = moved + 1
		end
	end
end
agg_file(agg_prefix(ARGV[1]), joined, now)
if ready then
	wake(KEYS[4])
end
local nextDue = -1
for z = 1, 2 do
	local first = redis.call("ZRANGE", KEYS[z], 0, 0, "WITHSCORES")
	if first[2] then
		local score = tonumber(first[2])
		if nextDue < 0 or score < nextDue then
			nextDue = score
		end
	end
end
-- The queue's aggregation (lib/aggregate.lua): wake the workers of each
-- name with a group or batch due by now; count the next one's time.
local P = agg_prefix(ARGV[1])
local names = {}
if redis.call("EXISTS", KEYS[5]) == 0 then
	names = redis.call("HKEYS", P .. "policies")
end
for _, name in ipairs(names) do
	for _, z in ipairs({ "due:", "batches:" }) do
		local first = redis.call("ZRANGE", P .. z .. name, 0, 0, "WITHSCORES")
		if first[2] then
			local score = tonumber(first[2])
			if score <= now then
				agg_wake(P, name)
			elseif nextDue < 0 or score < nextDue then
				nextDue = score
			end
		end
	end
end
return {moved, nextDue}
