-- trigger_chord: elect the member that sends the group's chord callback.
-- The first member to ask is elected; it is elected again if it asks again
-- (it may have died before sending the callback and run again); every
-- other member is refused. No lock: the script is atomic.
--
-- KEYS[1] group hash   KEYS[2] done hash   KEYS[3] order list
-- ARGV[1] member task UUID
-- ARGV[2] TTL of a completed group in ms (ResultsExpireIn)
-- ARGV[3] TTL of an unfinished group in ms (the safety TTL)
--
-- Returns: 1 the member is elected; 0 another member is; 2 the group has
-- no bookkeeping (never created, purged or expired).
-- Complexity: O(1).
local trig = redis.call("HGET", KEYS[1], "trig")
if trig then
	if trig == ARGV[1] then
		return 1
	end
	return 0
end
if redis.call("EXISTS", KEYS[1]) == 0 then
	return 2
end
redis.call("HSET", KEYS[1], "trig", ARGV[1])
-- The election is a write: the group's keys live on from it.
local ttl = ARGV[3]
if redis.call("HLEN", KEYS[2]) >= (tonumber(redis.call("HGET", KEYS[1], "count")) or 0) then
	ttl = ARGV[2]
end
for i = 1, 3 do
	redis.call("PEXPIRE", KEYS[i], ttl)
end
return 1
