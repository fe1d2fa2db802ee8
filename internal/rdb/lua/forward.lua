-- forward: move scheduled and retry tasks whose time has come to pending;
-- a member of an aggregation group (its hash names the group) joins its
-- group instead, filed by its name's last announced policy (never due
-- without one; lib/aggregate.lua). Run by the queue's elected
-- maintainer, it also wakes the aggregating workers of each task name
-- with a group or batch due, so that no worker polls for due groups, and
-- strands the members of a name no worker alive aggregates any more (its
-- announcement ended): those of its due groups, and of its batches whose
-- lease ended or whose retry came (but not one handed over to another
-- slot, hand_batch.lua, which only a worker can finish), go to pending as plain tasks (their
-- hashes still name their group), where a worker fails them or tries them
-- again, which puts them back in their group (retry.lua at once, or this
-- script's first loop when the retry comes).
--
-- KEYS[1] scheduled zset   KEYS[2] retry zset   KEYS[3] pending list
-- KEYS[4] notify list      KEYS[5] the queue's paused flag (a paused
--                            queue's workers are not woken for its
--                            batches, which they would not take)
-- KEYS[6] completed zset (ids of acknowledged tasks kept, by expiry)
-- ARGV[1] task hash key prefix (the queue's aggregation keys are found
--         from it)
-- ARGV[2] the most tasks to move from each zset, the most members to
--         strand, and the most due batches to read a name
-- ARGV[3] with wakes (on a single server), the longest the caller waits
--         for its next run, in ms: the run plans it (the queue's fnext,
--         lib/due.lua) at the next due time it returns, at most that far
--         off, or now when it moved as many as ARGV[2]; "0" for no plan
--         (the caller polls)
-- ARGV[4] "1" to trim the completed tasks whose retention ended, by the
--         server's clock, as ack_success.lua scored them
--
-- Returns: {moved, next_in, stranded}: how many tasks moved (members
-- stranded included), in how many µs (by the server's clock, so that the
-- caller's need not agree with it, and to the µs, so that a wait of that
-- long does not end up to a ms late) the earliest task, group or batch
-- still waiting is due, or an announcement with a group or batch due ends
-- (-1: none), and how many members were stranded.
-- An idle queue costs five commands a run (TIME, the head of each zset,
-- the names aggregated on it), one more with a plan (its SET) and one
-- more with a trim.
-- Complexity: O(N log S) for N tasks moved, plus O(A log G) for the A
-- task names ever aggregated on the queue, plus O(M log G) for M members
-- stranded, plus O(log B + H) a name for the H due batches it reads (at
-- most ARGV[2]).
local time = redis.call("TIME")
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now = math.floor(now_us / 1000) -- ms, as now_ms
due_quiet = true -- this run plans the next (below): no wake for its own filings
local moved, ready = 0, false
local joined = {} -- groups joined, to file once
-- heads holds each zset's earliest entry: when it is not due, nothing is
-- (an idle queue costs one read per zset), and it is the next due time.
local heads = {}
for z = 1, 2 do
	heads[z] = redis.call("ZRANGE", KEYS[z], 0, 0, "WITHSCORES")
	local ids = {}
	if heads[z][2] and tonumber(heads[z][2]) <= now then
		ids = redis.call("ZRANGEBYSCORE", KEYS[z], "-inf", now, "LIMIT", 0, tonumber(ARGV[2]))
		heads[z] = nil -- moved: read again below
	end
	for _, id in ipairs(ids) do
		redis.call("ZREM", KEYS[z], id)
		local key = ARGV[1] .. id
		local task = redis.call("HMGET", key, "state", "group", "band")
		if task[1] then
			redis.call("HDEL", key, "process_at")
			if task[2] then
				agg_join(agg_prefix(ARGV[1]), task[2], key, id, nil, now)
				joined[task[2]] = true
			else
				redis.call("HSET", key, "state", "pending")
				band_push(KEYS[3], task[3], id, false)
				ready = true
			end
			moved = moved + 1
		end
	end
end
agg_file(agg_prefix(ARGV[1]), joined, now)
local nextDue = -1
for z = 1, 2 do
	local first = heads[z] or redis.call("ZRANGE", KEYS[z], 0, 0, "WITHSCORES")
	if first[2] then
		local score = tonumber(first[2])
		if nextDue < 0 or score < nextDue then
			nextDue = score
		end
	end
end
-- The queue's aggregation (lib/aggregate.lua): wake the workers of each
-- name with a group or batch due by now; count the next one's time.
local P = agg_prefix(ARGV[1])
-- A queue nothing was ever aggregated on costs one read; a paused one's
-- workers are not woken.
local names = redis.call("HKEYS", P .. "policies")
if #names > 0 and redis.call("EXISTS", KEYS[5]) == 1 then
	names = {}
end
local budget = tonumber(ARGV[2])
local stranded = 0
-- strand sends members ids to pending as plain tasks.
local function strand(ids)
	for _, id in ipairs(ids) do
		local key = ARGV[1] .. id
		if redis.call("EXISTS", key) == 1 then
			-- Tried again, it joins its group as its newest member.
			redis.call("HSET", key, "state", "pending")
			redis.call("HDEL", key, "joined")
			band_push(KEYS[3], redis.call("HGET", key, "band"), id, false)
			ready = true
		end
	end
	redis.call("DECRBY", P .. "count", #ids)
	stranded = stranded + #ids
	budget = budget - #ids
end
-- first returns the first entry of zset key due by now, and its score.
local function first(key)
	local e = redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
	if e[2] and tonumber(e[2]) <= now then
		return e[1], tonumber(e[2])
	end
end
for _, name in ipairs(names) do
	local policy = agg_policy(P, name)
	if policy and policy.till <= now then
		-- A batch handed over (hand_batch.lua) has its aggregate decided:
		-- it waits for a worker of its name to finish it, and is passed
		-- over. The due batches are read once, ARGV[2] at most: handed
		-- ones, however many, neither take the budget of the name's due
		-- groups (below) nor cost a run more than that page. A batch
		-- behind ARGV[2] handed ones is not reached while they wait.
		local batches = P .. "batches:" .. name
		local page = {}
		if budget > 0 then
			page = redis.call("ZRANGE", batches, "-inf", now, "BYSCORE", "LIMIT", 0, tonumber(ARGV[2]))
		end
		for _, id in ipairs(page) do
			if budget <= 0 then
				break
			end
			local batch = P .. "batch:" .. id
			local b = redis.call("HMGET", batch, "msg", "handed")
			if not b[2] then
				redis.call("ZREM", batches, id)
				redis.call("DEL", batch)
				if b[1] then
					strand(cjson.decode(b[1]))
				end
			end
		end
		while budget > 0 do
			local key = first(P .. "due:" .. name)
			if not key then
				break
			end
			-- The index may hold the group early (lib/aggregate.lua).
			local g = name .. "\n" .. key
			local due = agg_schedule(P, g, policy)
			if due and due <= now then
				local ids = {}
				local popped = redis.call("ZPOPMIN", P .. "group:" .. g, budget)
				for i = 1, #popped, 2 do
					table.insert(ids, popped[i])
				end
				strand(ids)
				agg_schedule(P, g, policy)
			end
		end
	end
	for _, z in ipairs({ "due:", "batches:" }) do
		local e = redis.call("ZRANGE", P .. z .. name, 0, 0, "WITHSCORES")
		if e[2] then
			local score = tonumber(e[2])
			if score <= now then
				agg_wake(P, name)
				-- Due with no one taking it: its members are stranded
				-- when the announcement ends.
				score = policy and policy.till
			end
			if score and score > now and (nextDue < 0 or score < nextDue) then
				nextDue = score
			end
		end
	end
end
if ready then
	wake(KEYS[4])
end
local most = tonumber(ARGV[3])
if most > 0 then
	local plan = now + most
	if moved + stranded >= tonumber(ARGV[2]) then
		plan = now
	elseif nextDue >= 0 and nextDue < plan then
		plan = nextDue
	end
	-- It outlives a plan by two runs: a maintainer that died leaves none.
	-- A refusal (Redis out of memory, the run's first write) leaves no
	-- plan: writers then wake nobody, and the caller runs again within
	-- most.
	redis.pcall("SET", string.sub(ARGV[1], 1, -3) .. "fnext", string.format("%d", plan), "PX", 3 * most)
end
if ARGV[4] == "1" then
	redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", now)
end
if nextDue >= 0 then
	nextDue = math.max(nextDue * 1000 - now_us, 0)
end
return {moved + stranded, nextDue, stranded}
