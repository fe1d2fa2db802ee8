-- record_member records the final state of a group member in its group's
-- bookkeeping (group hash, done hash, order list), creating it when
-- InitGroup was not called, and sets how long the group's keys live. A
-- member that finishes again (it ran again) replaces its state and keeps
-- its place in the order list, so it counts once. It returns how many
-- members have finished. ack_success.lua's prelude writes it out for a
-- member's success: TestAckSuccessPreludeWritesWhatTheLibWrites holds the
-- two together.
local function record_member(meta, done, order, id, state, count, created_at, ttl_done, ttl_running)
	if redis.call("HSET", done, id, state) == 1 then
		redis.call("RPUSH", order, id)
	end
	-- The group's count and created_at (InitGroup's, or, for a group sent
	-- without it, the first member's to finish) are read in one HMGET and
	-- written only when missing.
	local m = redis.call("HMGET", meta, "count", "created_at")
	local total = m[1]
	if not total then
		redis.call("HSET", meta, "count", count)
		total = count
	end
	if not m[2] then
		redis.call("HSET", meta, "created_at", created_at)
	end
	local finished = redis.call("HLEN", done)
	-- The keys get their TTL together: at once when the group completes
	-- or its hash was made now, else as keep_alive says (the done hash's
	-- TTL, first, says when they last had it).
	local complete = finished >= tonumber(total)
	if complete then
		keep_alive({ done, meta, order }, tonumber(ttl_done), true)
	else
		keep_alive({ done, meta, order }, tonumber(ttl_running), not m[1])
	end
	return finished
end
