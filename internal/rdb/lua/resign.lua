-- resign: end holder's term as a queue's maintainer, if it has it, so that
-- another process takes over at its next election instead of at the
-- term's end; and release machinery's chord lock (rdb's Machinery.Lock),
-- if it is still the caller's. Safe to run twice.
--
-- KEYS[1] the queue's maintainer key, or the lock
-- ARGV[1] holder (the lock's value)
--
-- Returns: 1 the term ended; 0 holder was not the maintainer.
-- Complexity: O(1).
if redis.call("GET", KEYS[1]) == ARGV[1] then
	redis.call("DEL", KEYS[1])
	return 1
end
return 0
