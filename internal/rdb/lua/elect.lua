-- elect: make holder the maintainer of a queue (the one process that runs
-- its forwarder and recoverer) for a term, or renew its term.
--
-- KEYS[1] the queue's maintainer key
-- ARGV[1] holder (a process's random id)
-- ARGV[2] term in ms
--
-- Returns: 1 holder is the maintainer until the term ends; 0 another is.
-- Complexity: O(1).
local current = redis.call("GET", KEYS[1])
if current == ARGV[1] then
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return 1
end
if not current then
	redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
	return 1
end
return 0
