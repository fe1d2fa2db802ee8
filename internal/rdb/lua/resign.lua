-- resign: end holder's term as a queue's maintainer, if it has it, so that
-- another process takes over at its next election instead of at the
-- term's end.
--
-- KEYS[1] the queue's maintainer key
-- ARGV[1] holder
--
-- Returns: 1 the term ended; 0 holder was not the maintainer.
-- Complexity: O(1).
if redis.call("GET", KEYS[1]) == ARGV[1] then
	redis.call("DEL", KEYS[1])
	return 1
end
return 0
