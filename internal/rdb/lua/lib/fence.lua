-- holds reports whether the caller holds the lease of a task: token is
-- the task hash's fencing token, and the lease's expiry (lease_exp, kept
-- beside it and in the lease zset) is after now, so a lease whose expiry
-- passed is refused even before the recoverer takes it back.
local function holds(task_key, token, now)
	local lease = redis.call("HMGET", task_key, "lease", "lease_exp")
	return lease[1] == token and (tonumber(lease[2]) or 0) > now
end
