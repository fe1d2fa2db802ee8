-- forget ends an acknowledged task: it leaves the lease zset, and its hash
-- is deleted or, with keep > 0 (CompletedRetention in ms), kept marked
-- completed (settled under token) for keep ms, listed in the completed
-- zset.
local function forget(task_key, lease_key, completed_key, id, token, keep, now)
	redis.call("ZREM", lease_key, id)
	if keep > 0 then
		redis.call("HSET", task_key, "state", "completed", "settled", token)
		redis.call("HDEL", task_key, "lease", "lease_exp", "outcome")
		redis.call("PEXPIRE", task_key, keep)
		redis.call("ZADD", completed_key, now + keep, id)
	else
		redis.call("DEL", task_key)
	end
end
