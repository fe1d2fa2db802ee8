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
	local complete = finished >= tonumber(total)
	local ttl = tonumber(ttl_running)
	if complete then
		ttl = tonumber(ttl_done)
	end
	-- An unfinished group's keys, which its first member to finish or
	-- InitGroup gave one TTL, are extended together, at most once a
	-- minute (as lib/graph.lua's graph_keep): the done hash's TTL says
	-- when they were last.
	if complete or not m[1] or redis.call("PTTL", done) < ttl - math.min(60000, ttl / 2) then
		redis.call("PEXPIRE", meta, ttl)
		redis.call("PEXPIRE", done, ttl)
		redis.call("PEXPIRE", order, ttl)
	end
	return finished
end
