-- complete_claim: mark a claim done (brokers/iface.Claimer.CompleteClaim)
-- for the holder of a token, as long as no other token took it over, even
-- after the lease ended. The key keeps its expiry. Safe to run twice.
--
-- KEYS[1] the claim key (see claim_lease.lua)
-- ARGV[1] token
--
-- Returns: 0 the key is done (by this run or an earlier one); 1 another
-- token holds it, or it is gone (its record ended).
-- Complexity: O(1).
local current = redis.call("GET", KEYS[1])
if current == "done" then
	return 0
end
if not current or string.match(current, "^(%S+) ") ~= ARGV[1] then
	return 1
end
redis.call("SET", KEYS[1], "done", "PX", math.max(redis.call("PTTL", KEYS[1]), 1))
return 0
