-- free_unique frees unique key ukey (a task hash's unique field, or
-- false; see enqueue.lua) if task id still holds it.
local function free_unique(ukey, id)
	if ukey and redis.call("GET", ukey) == id then
		redis.call("DEL", ukey)
	end
end

-- release_unique frees the unique key task id (hash task_key) holds, if
-- it still holds it: the task finished.
local function release_unique(task_key, id)
	free_unique(redis.call("HGET", task_key, "unique"), id)
end

-- release_holds frees what task id (hash task_key), which stops running
-- for good, holds: its unique key and its limit's concurrency slot, the
-- hash's unique and limit fields, read in one HMGET unless the caller
-- has read them (lib/fence.lua's check_settle: false for a field the
-- hash has not, nil for not read).
local function release_holds(task_key, id, unique, limit)
	if unique == nil then
		local h = redis.call("HMGET", task_key, "unique", "limit")
		unique, limit = h[1], h[2]
	end
	free_unique(unique, id)
	limit_free(limit, task_key, id)
end

-- forget ends an acknowledged task: it frees its concurrency slot and its
-- unique key, leaves the lease zset, and its hash
-- is deleted or, with keep > 0 (CompletedRetention in ms), kept marked
-- completed (settled under token) for keep ms, listed in the completed
-- zset. unique and limit are release_holds'.
local function forget(task_key, lease_key, completed_key, id, token, keep, now, unique, limit)
	release_holds(task_key, id, unique, limit)
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
