-- enqueue: publish tasks to one queue, all or nothing, with their PENDING
-- states when the state hashes are given. Safe to run twice: a second run
-- with the same publish token (sent again after a lost reply) finds the
-- first's tasks, or, marked as a repeat, their states once the tasks ran
-- and were forgotten, and reports success. A member of an aggregation
-- group (lib/aggregate.lua) joins its group instead of pending when it is
-- due now, or waits in the scheduled zset with its group recorded.
--
-- KEYS[1] pending list      KEYS[2] scheduled zset
-- KEYS[3] archived zset     KEYS[4] notify list (wake-up tokens)
-- KEYS[5..] the tasks' state hashes, one per task, in ARGV's order
--           (optional: on a single server only). With k > 0 the PENDING
--           state is written with the publish token (pub); with k = 0 the
--           PENDING states were written just before, by the sender.
-- ARGV[1] task hash key prefix ("<prefix>:{<queue>}:t:")
-- ARGV[2] state TTL in ms
-- ARGV[3] k, how many state field, value items each task has (0 without
--         KEYS[5..])
-- ARGV[4] publish token, random per publish, kept in each task hash (pub)
-- ARGV[5] "1" when the caller sends this again, not knowing whether its
--         first run happened: a task whose hash is gone counts as
--         published when its state names the token (k > 0) or is final
--         (k = 0: the PENDING state the sender wrote has been replaced by
--         the task's outcome)
-- ARGV[6..] for each task: id, message (JSON signature), ETA in ms since
--           the epoch (0: now), its aggregation group ("<name>\n<key>", ""
--           for a task that is no member), then k items: its PENDING
--           state's fields
-- The queue's aggregation keys are found from ARGV[1] (lib/aggregate.lua).
--
-- Returns: {0} when every task was published (by this run or an earlier
-- one with the same token, whose tasks may have run, been archived or
-- been forgotten since: then nothing is written), or {1, id} when a
-- task with that id is held by the queue (lib/queue.lua's held) from
-- another publish or appears twice in ARGV, or {4, id} when the task is a
-- member and no announcement alive (announce_aggregators.lua) covers its
-- task name; then nothing was written. A task whose id is archived
-- replaces it.
-- Complexity: O(N log M) for N tasks and M scheduled tasks or members of
-- a group.
local now = now_ms()
local k = tonumber(ARGV[3])
local stride = 4 + k
local states = #KEYS > 4
local repeated = ARGV[5] == "1"
local seen, archived = {}, {}
local P -- the aggregation prefix, once a member is met
local live = {} -- task name → its policy, with an announcement alive
local n = 4
for i = 6, #ARGV, stride do
	local id = ARGV[i]
	local key = ARGV[1] .. id
	n = n + 1
	local busy, was_archived = held(key)
	-- This publish ran before (the tasks went in all at once) when a task
	-- hash (queued, running, kept or archived since) or, once the task
	-- was forgotten, its state names this publish: nothing more to do.
	if (busy or was_archived) and redis.call("HGET", key, "pub") == ARGV[4] then
		return {0}
	end
	if repeated and states and not busy and not was_archived then
		local state = redis.call("HMGET", KEYS[n], "pub", "state")
		if k > 0 and state[1] == ARGV[4] or k == 0 and (state[2] == "SUCCESS" or state[2] == "FAILURE") then
			return {0}
		end
	end
	if seen[id] or busy then
		return {1, id}
	end
	local g = ARGV[i + 3]
	if g ~= "" then
		P = P or agg_prefix(ARGV[1])
		local name = agg_split(g)
		if not live[name] then
			local policy = agg_policy(P, name)
			if not policy or policy.till <= now then
				return {4, id}
			end
			live[name] = policy
		end
	end
	seen[id] = true
	archived[id] = was_archived
end
local ready = false
local joined = {} -- groups joined, to file once
n = 4
for i = 6, #ARGV, stride do
	local id = ARGV[i]
	if k > 0 then
		n = n + 1
		local fields = { unpack(ARGV, i + 4, i + 3 + k) }
		table.insert(fields, "pub")
		table.insert(fields, ARGV[4])
		write_state(KEYS[n], ARGV[2], "", fields)
	end
	local key, g, eta = ARGV[1] .. id, ARGV[i + 3], tonumber(ARGV[i + 2])
	if g == "" then
		if put(KEYS[1], KEYS[2], KEYS[3], key, id, ARGV[i + 1], eta, archived[id], ARGV[4], now) then
			ready = true
		end
	elseif eta > now then
		put(KEYS[1], KEYS[2], KEYS[3], key, id, ARGV[i + 1], eta, archived[id], ARGV[4], now)
		redis.call("HSET", key, "group", g)
	else
		if archived[id] then
			redis.call("ZREM", KEYS[3], id)
			redis.call("DEL", key)
		end
		agg_join(P, g, key, id, nil, now, { "msg", ARGV[i + 1], "pub", ARGV[4] })
		joined[g] = true
	end
end
agg_file(P, joined, now, live)
if ready then
	wake(KEYS[4])
end
return {0}
