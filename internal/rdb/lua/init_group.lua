-- init_group: record a group's members in group order and set how long the
-- group's keys live. Members that finished before InitGroup stay recorded.
--
-- KEYS[1] group hash   KEYS[2] done hash   KEYS[3] order list
-- ARGV[1] the members' UUIDs in group order (JSON array)
-- ARGV[2] the group's task count
-- ARGV[3] created_at (RFC 3339), kept if the group already has one
-- ARGV[4] TTL of a completed group in ms (ResultsExpireIn)
-- ARGV[5] TTL of an unfinished group in ms (the safety TTL)
--
-- Returns: how many members have finished (HLEN of the done hash).
-- Complexity: O(1) (plus the size of ARGV[1], written as one value).
redis.call("HSET", KEYS[1], "uuids", ARGV[1], "count", ARGV[2])
redis.call("HSETNX", KEYS[1], "created_at", ARGV[3])
local done = redis.call("HLEN", KEYS[2])
local ttl = ARGV[5]
if done >= tonumber(ARGV[2]) then
	ttl = ARGV[4]
end
for i = 1, 3 do
	redis.call("PEXPIRE", KEYS[i], ttl)
end
return done
