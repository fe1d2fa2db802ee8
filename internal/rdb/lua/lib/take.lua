-- take_out does an operator's action on task id (hash task_key), taken
-- out of its place in its queue already (take_waiting.lua,
-- take_all.lua): "delete" it (a unique task frees its key), "archive" it
-- with reason on the archived zset (not trimmed here), or "run" it: a
-- member of aggregation group g (aggregation prefix P) joins its group,
-- any other task goes on its band's list (lib/band.lua: band, at the head
-- with front). A task that leaves for good lets one parked on its limit
-- key try again.
local function take_out(task_key, id, action, g, band, front, reason, now, pending, archived, P)
	if action ~= "run" then
		limit_pass(task_key, id)
	end
	if action == "delete" then
		release_unique(task_key, id)
		redis.call("DEL", task_key)
		return
	end
	redis.call("HDEL", task_key, "rerouted", "process_at", "limit_slot")
	if action == "archive" then
		release_unique(task_key, id)
		redis.call("HSET", task_key, "state", "archived", "error", reason, "failed_at", now)
		redis.call("ZADD", archived, now, id)
	elseif g then
		agg_join(P, g, task_key, id, nil, now)
	else
		redis.call("HSET", task_key, "state", "pending")
		band_push(pending, band, id, front)
	end
end
