-- due_quiet, set by forward.lua, keeps due_at from waking the maintainer
-- that is running forward.lua: it plans its next run when it ends.
local due_quiet = false

-- due_at tells a queue's elected maintainer (forward.lua's caller) that
-- something of the queue comes due at t (ms since the epoch): a scheduled
-- or retrying task, an aggregation group, a batch whose lease or retry
-- ends. qbase is the queue's key prefix ("<prefix>:{<queue>}:"). The
-- maintainer's plan, the time it will run forward.lua next, is the
-- queue's fnext key (forward.lua writes it, on a single server only);
-- when t is before it, fnext becomes t and a message on the queue's fwake
-- channel wakes the maintainer, which runs forward.lua at once (and then
-- waits for t). Without fnext (on a Cluster, where the maintainer polls,
-- or with no maintainer) it writes nothing. One command (GET) when nothing
-- moves, three (and SET and PUBLISH) when the maintainer is woken.
local function due_at(qbase, t)
	if due_quiet then
		return
	end
	local key = qbase .. "fnext"
	local plan = redis.call("GET", key)
	if plan and t < tonumber(plan) then
		redis.call("SET", key, string.format("%d", t), "KEEPTTL")
		redis.call("PUBLISH", qbase .. "fwake", "")
	end
end
