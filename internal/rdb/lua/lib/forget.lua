-- release_unique frees the unique key a task holds (its hash's unique
-- field; see enqueue.lua), if it still holds it: the task finished.
local function release_unique(task_key, id)
	local ukey = redis.call("HGET", task_key, "unique")
	if ukey and redis.call("GET", ukey) == id then
		redis.call("DEL", ukey)
	end
end

-- forget ends an acknowledged task: it frees its concurrency slot and its
-- unique key, leaves the lease zset, and its hash
-- is deleted or, with keep > 0 (CompletedRetention in ms), kept marked
-- completed (settled under token) for keep ms, listed in the completed
-- zset.
local function forget(task_key, lease_key, completed_key, id, token, keep, now)
	limit_release(task_key, id)
	release_unique(task_key, id)
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
