-- group_done: record the final state of a group member in its group's
-- bookkeeping, creating the bookkeeping when InitGroup was not called, and
-- set how long the group's keys live.
--
-- KEYS[1] group hash   KEYS[2] done hash   KEYS[3] order list
-- ARGV[1] member task UUID
-- ARGV[2] the member's final state (JSON TaskState)
-- ARGV[3] the group's task count, kept if the group already has one
-- ARGV[4] created_at (RFC 3339), kept if the group already has one
-- ARGV[5] TTL of a completed group in ms (ResultsExpireIn)
-- ARGV[6] TTL of an unfinished group in ms (the safety TTL)
--
-- A member that finishes again (it ran again) replaces its state and keeps
-- its place in the order list, so it counts once.
--
-- Returns: how many members have finished (HLEN of the done hash).
-- Complexity: O(1).
if redis.call("HSET", KEYS[2], ARGV[1], ARGV[2]) == 1 then
	redis.call("RPUSH", KEYS[3], ARGV[1])
end
redis.call("HSETNX", KEYS[1], "count", ARGV[3])
redis.call("HSETNX", KEYS[1], "created_at", ARGV[4])
local done = redis.call("HLEN", KEYS[2])
local ttl = ARGV[6]
if done >= tonumber(redis.call("HGET", KEYS[1], "count")) then
	ttl = ARGV[5]
end
for i = 1, 3 do
	redis.call("PEXPIRE", KEYS[i], ttl)
end
return done
