-- claim_lease: take a claim (brokers/iface.Claimer.ClaimLease) for a lease,
-- unless another token's lease on it runs or it is done. Safe to run
-- twice: a second run with the same token (sent again after a lost reply)
-- finds the first's lease and reports what the first reported.
--
-- KEYS[1] the claim key, a string: "<token> <lease end, ms> <taken over:
--         0 or 1>" while claimed, "done" once completed; it lives keep ms
--         after the last run that took it
-- ARGV[1] token (random per ClaimLease call)
-- ARGV[2] lease in ms (at least 1)
-- ARGV[3] keep in ms (at least the lease)
--
-- Returns: {status, ms}: {0, 0} the token holds the lease, on a key that
-- was free; {1, 0} the token holds the lease, taken over from a lease that
-- ended without being completed; {2, ms} another token's lease runs for ms
-- more; {3, 0} the key is done. A value of another shape (a claim of an
-- older machinist) counts as a lease that runs until the key expires.
-- Complexity: O(1).
local now = now_ms()
local current = redis.call("GET", KEYS[1])
if current == "done" then
	return {3, 0}
end
local taken_over = 0
if current then
	local token, lease_end, was_taken_over = string.match(current, "^(%S+) (%d+) ([01])$")
	if not token then
		return {2, math.max(redis.call("PTTL", KEYS[1]), 1)}
	end
	if token == ARGV[1] then
		return {tonumber(was_taken_over), 0}
	end
	-- now is TIME cut to the ms, as was the lease's start: the lease runs
	-- through its last ms, so that it never ends before its time.
	lease_end = tonumber(lease_end)
	if lease_end >= now then
		return {2, math.max(lease_end - now, 1)}
	end
	taken_over = 1
end
redis.call("SET", KEYS[1], ARGV[1] .. " " .. (now + tonumber(ARGV[2])) .. " " .. taken_over, "PX", ARGV[3])
return {taken_over, 0}
