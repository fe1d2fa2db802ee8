-- holds reports whether the caller holds the lease of a task: token is
-- the task hash's fencing token, and the lease's expiry (lease_exp, kept
-- beside it and in the lease zset) is after now, so a lease whose expiry
-- passed is refused even before the recoverer takes it back. It also
-- returns the task's at and pub (when it was sent and the token of the
-- publish that sent it, lib/queue.lua's put; false for none), read by the
-- same HMGET, which a script writing the task's state writes in it
-- (lib/state.lua's write_state), and its unique and limit fields, which
-- a settle frees (lib/forget.lua's release_holds; false for none).
local function holds(task_key, token, now)
	local lease = redis.call("HMGET", task_key, "lease", "lease_exp", "at", "pub", "unique", "limit")
	return lease[1] == token and (tonumber(lease[2]) or 0) > now, lease[3], lease[4], lease[5], lease[6]
end

-- settled_by reports whether the caller settled the task in a run whose
-- reply it never got: the task hash is gone (acknowledged) or names token
-- as the lease it was last settled under.
local function settled_by(task_key, token)
	local v = redis.call("HMGET", task_key, "settled", "msg")
	return v[1] == token or not v[2]
end

-- check_settle fences a settle script: it returns nil when the caller
-- holds the lease (go on), with the task's at, pub, unique and limit (see
-- holds), else
-- what the script returns: 0 when again is "1" (the caller runs it again,
-- not knowing whether its first run happened) and the first run settled
-- the task, 2 otherwise.
local function check_settle(task_key, token, again, now)
	local held, at, pub, unique, limit = holds(task_key, token, now)
	if held then
		return nil, at, pub, unique, limit
	end
	if again == "1" and settled_by(task_key, token) then
		return 0
	end
	return 2
end
