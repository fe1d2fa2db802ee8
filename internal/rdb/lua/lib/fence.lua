-- holds reports whether the caller holds the lease of task id: token is
-- the task's fencing token, and the lease has not expired at now (a lease
-- whose expiry passed is refused even before the recoverer takes it back).
local function holds(task_key, lease_key, id, token, now)
	if redis.call("HGET", task_key, "lease") ~= token then
		return false
	end
	local expiry = tonumber(redis.call("ZSCORE", lease_key, id))
	return expiry ~= nil and expiry > now
end
