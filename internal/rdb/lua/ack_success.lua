-- ack_success: for the lease holder only, write a task's SUCCESS state
-- (a group member's also in its group), publish the tasks that follow it
-- (its OnSuccess callbacks; their PENDING states are implicit, as
-- enqueue.lua's), and settle the
-- task, in one step. Used on a single Redis server, where the state, group
-- and other queues' keys may be touched by one script (elsewhere the
-- worker commits, writes the state, sends the callbacks, then
-- acknowledges).
--
-- KEYS[1] task hash   KEYS[2] lease zset   KEYS[3] completed zset
-- KEYS[4] the task's state hash (result backend)
-- KEYS[5] group hash  KEYS[6] done hash  KEYS[7] order list (a group
--         member only: ARGV[6] is not "")
-- then, for a node of a workflow's graph (ARGV[15+m] is not ""), the
--         graph's graph, nodes, wait and res hashes
-- then for each next task: its queue's pending list, scheduled zset,
--         archived zset and notify list, its task hash, its state hash
--         (read after a recovery: ARGV[11])
-- then, with a take (ARGV[12]), the take's keys
-- ARGV[1] "1" when the caller runs this again, not knowing whether its
--         first run happened (lib/fence.lua's check_settle; see rdb's RunSettle)
-- ARGV[2] task id
-- ARGV[3] fencing token
-- ARGV[4] completed retention in ms (0: forget the task at once)
-- ARGV[5] state TTL in ms
-- ARGV[6] a group member's final state (JSON TaskState), or ""
-- ARGV[7] created_at (RFC 3339), for a group that has none
-- ARGV[8] the group's task count
-- ARGV[9] TTL of a completed group in ms   ARGV[10] of an unfinished one
-- ARGV[11] "1" when the task ran again after a recovery: a next task whose
--          state shows it started or finished is not sent again
-- ARGV[12] t, how many keys of a take end KEYS (0: no take; else 3 or
--          5: the queue's pending list, paused flag and notify list, then
--          optionally its rerouted set and the caller's names set, as
--          dequeue.lua's KEYS[5..6]); the task's queue is the take's
-- ARGV[13] "1" for a group member whose group has a chord callback: when
--          its success completes the group, the script records ARGV[6]
--          as the task's outcome (as commit.lua) and does not settle it
--          (nor take): the caller elects the callback's sender first
-- ARGV[14] m, then m items: the SUCCESS state's field, value pairs
--          (created_at, when the state has none, is the task hash's at:
--          when it was sent)
-- ARGV[15+m] the task's node key in its workflow's graph, or ""
-- ARGV[16+m] its results (JSON), for the graph   ARGV[17+m] the graph's
--          TTL in ms (lib/graph.lua's graph_done)
-- then for each next task: id, message (as enqueue.lua's), ETA in ms (0:
--          now), its limit (lib/limit.lua; "" for none), its band
--          (lib/band.lua; "" for none)
-- with a take, last: the task hash key prefix, the lease duration in ms
--          and the fencing token of the task taken
--
-- With a take, the script then takes the next task of the task's queue
-- for the slot it frees (lib/queue.lua's take_tasks): a next task sent
-- to that queue may be the one taken, without a wake-up.
--
-- A node of a workflow's graph records its success in the graph, and the
-- nodes that follow it and are ready (lib/graph.lua's graph_done) are sent
-- as next tasks are: to the queues whose keys the graph hash names (q:<queue>),
-- their state keys the graph's state prefix (sp) and their ids.
--
-- A next task that its queue still holds (lib/queue.lua's held) counts as
-- sent and is left alone; so does one its workflow's cancellation keeps
-- out (a "cancelled" hash, cancel.lua): it is not sent.
--
-- Returns: 0 done; 2 the caller does not hold the lease (nothing written);
-- 8 a chord member completed its group: written, committed, not settled
-- (3 and 4 are other scripts' statuses).
-- With a take, done is {0, expiry_ms} followed by the task taken as
-- dequeue.lua gives it, if one was; a run again that finds its first run
-- settled the task returns 0 and takes nothing (the first run's task, if
-- any, is the caller's to put back: release_fetch.lua).
-- Complexity: O(log L) plus, with retention, O(log C); plus O(log S) per
-- next task.
--
-- The common settles are written here, before the lib definitions (rdb's
-- libMark), as check_settle, write_state, notify_final, record_member,
-- graph_done, send_next, forget and take_tasks would write them:
-- TestAckSuccessPreludeWritesWhatTheLibWrites holds the two together. A
-- common settle is the success of a task that has no unique key or limit,
-- is acknowledged at once (no completed retention) and takes the next
-- task of its queue, and either is a group member (a chord's not run
-- again) with nothing to send, or a graph's node whose first success
-- releases none of its successors (at most 16, none named twice) and
-- leaves its graph unfinished, or sends nothing, or, in a run that is not
-- after a recovery, one next task (a chain's next step) due now, to its
-- own queue, with no limit or band, whose id has no task hash. A next
-- task that the take would take, the queue holding nothing pending, is
-- handed over: its hash is written active under the take's lease at
-- once, rather than pushed and popped. The prelude reads all it decides
-- by before it writes (a refusal for memory, at the first write, leaves
-- nothing written); any other case, and a pending head that is gone, not
-- in state "pending" (take_tasks drops it), limited or the settled task's
-- own id, or a queue with bands (lib/band.lua), goes on to the general
-- path.
local t0 = tonumber(ARGV[12])
local m0 = tonumber(ARGV[14])
local sends = #ARGV - 20 - m0 -- five items a next task
local member = ARGV[6] ~= ""
local node = ARGV[15 + m0] ~= "" and ARGV[15 + m0] -- its key in its graph, or false
if ARGV[4] == "0" and (t0 == 3 or t0 == 5) and (not node or not member and sends == 0)
	and (ARGV[13] == "0" or member and ARGV[1] ~= "1")
	and (sends == 0 or sends == 5 and not member and ARGV[11] ~= "1" and KEYS[5] == KEYS[#KEYS - t0 + 1]
		and ARGV[21 + m0] == "" and ARGV[22 + m0] == "") then
	local tv = redis.call("TIME")
	local now = tonumber(tv[1]) * 1000 + math.floor(tonumber(tv[2]) / 1000)
	local h = redis.call("HMGET", KEYS[1], "lease", "lease_exp", "at", "pub", "unique", "limit")
	local nid = sends == 5 and ARGV[18 + m0] -- the next task, or false
	if h[1] == ARGV[3] and (tonumber(h[2]) or 0) > now and not h[5] and not h[6]
		and (not nid or tonumber(ARGV[20 + m0]) <= now) then
		local first = #KEYS - t0 + 1
		local pending = KEYS[first]
		-- One EXISTS says whether any of the paused flag, the rerouted
		-- set, the levels (lib/band.lua) and the next task's hash exist,
		-- each named twice (the flag stands in for one not asked about),
		-- and whether tasks are pending, named once.
		local paused, levels = KEYS[first + 1], pending .. ":levels"
		local rerouted = t0 == 5 and KEYS[first + 3] or paused
		local next_key = nid and KEYS[9] or paused
		local n = redis.call("EXISTS", paused, paused, rerouted, rerouted, levels, levels, next_key, next_key, pending)
		local flags = n >= 2
		local prefix = ARGV[#ARGV - 2]
		local id, fields = false, false
		if not flags and n == 1 then
			id = redis.call("LINDEX", pending, 0)
			fields = redis.call("HMGET", prefix .. id, "msg", "retried", "recovered", "outcome", "limit", "state")
			if not fields[1] or fields[6] ~= "pending" or prefix .. id == KEYS[1] or (fields[5] and not fields[4]) then
				flags = true
			end
		end
		-- A node of a graph: its first success (no results recorded), in a
		-- graph that goes on (PENDING, other nodes left), releasing none of
		-- its successors (at most 16, each waiting for another dep too).
		local succ = false
		if node and not flags then
			local g = redis.call("HMGET", KEYS[5], "state", "nodes", "done")
			local rec = redis.call("HGET", KEYS[6], node)
			flags = g[1] ~= "PENDING" or not rec or (tonumber(g[3]) or 0) + 1 >= (tonumber(g[2]) or 0)
				or redis.call("HEXISTS", KEYS[8], node) == 1
			if not flags then
				succ = cjson.decode(rec).s or {}
				if #succ > 16 then
					flags = true
				elseif #succ > 0 then
					-- A successor named twice is counted down twice.
					local seen = {}
					for i, left in ipairs(redis.call("HMGET", KEYS[7], unpack(succ))) do
						if tonumber(left) == 1 or seen[succ[i]] then
							flags = true
						end
						seen[succ[i]] = true
					end
				end
			end
		end
		if not flags then
			local state = { unpack(ARGV, 15, 14 + m0) }
			if h[3] then
				table.insert(state, "created_at")
				table.insert(state, h[3])
			end
			if h[4] then
				table.insert(state, "pub")
				table.insert(state, h[4])
			end
			redis.call("HSET", KEYS[4], unpack(state))
			redis.call("PEXPIRE", KEYS[4], ARGV[5])
			redis.call("PUBLISH", KEYS[4], "")
			if member then -- lib/group.lua's record_member
				if redis.call("HSET", KEYS[6], ARGV[2], ARGV[6]) == 1 then
					redis.call("RPUSH", KEYS[7], ARGV[2])
				end
				local g = redis.call("HMGET", KEYS[5], "count", "created_at")
				local total = g[1] or ARGV[8]
				if not g[1] then
					redis.call("HSET", KEYS[5], "count", total)
				end
				if not g[2] then
					redis.call("HSET", KEYS[5], "created_at", ARGV[7])
				end
				local finished = redis.call("HLEN", KEYS[6])
				local complete = finished >= tonumber(total)
				local ttl = tonumber(complete and ARGV[9] or ARGV[10])
				if complete or not g[1] or redis.call("PTTL", KEYS[6]) < ttl - math.min(60000, ttl / 2) then
					for i = 5, 7 do
						redis.call("PEXPIRE", KEYS[i], ttl)
					end
				end
				if ARGV[13] == "1" and finished >= tonumber(ARGV[8]) then
					redis.call("HSET", KEYS[1], "outcome", ARGV[6])
					return 8
				end
			end
			-- lib/graph.lua's graph_done releasing nothing, and lib/keep.lua's
			-- keep_alive
			if node then
				redis.call("HSET", KEYS[8], node, ARGV[16 + m0])
				redis.call("HINCRBY", KEYS[5], "done", 1)
				local ttl = tonumber(ARGV[17 + m0])
				if redis.call("PTTL", KEYS[5]) < ttl - math.min(60000, ttl / 2) then
					for i = 5, 8 do
						redis.call("PEXPIRE", KEYS[i], ttl)
					end
				end
				for _, key in ipairs(succ) do
					redis.call("HINCRBY", KEYS[7], key, -1)
				end
			end
			redis.call("ZREM", KEYS[2], ARGV[2])
			local expiry = now + tonumber(ARGV[#ARGV - 1])
			local token = ARGV[#ARGV]
			if nid then
				redis.call("DEL", KEYS[1], KEYS[10])
				if not id then
					redis.call("HSET", KEYS[9], "msg", ARGV[19 + m0], "state", "active", "pub", ARGV[3], "at", now,
						"lease", token, "lease_exp", expiry)
					redis.call("ZADD", KEYS[2], expiry, nid)
					return { 0, expiry, nid, ARGV[19 + m0], "0", "0", token, "" }
				end
				redis.call("HSET", KEYS[9], "msg", ARGV[19 + m0], "state", "pending", "pub", ARGV[3], "at", now)
				redis.call("RPUSH", pending, nid)
			else
				redis.call("DEL", KEYS[1])
			end
			if not id then
				return { 0, expiry }
			end
			redis.call("LPOP", pending)
			redis.call("HSET", prefix .. id, "state", "active", "lease", token, "lease_exp", expiry)
			redis.call("ZADD", KEYS[2], expiry, id)
			if nid and redis.call("LLEN", KEYS[first + 2]) == 0 then
				redis.call("LPUSH", KEYS[first + 2], "1") -- lib/queue.lua's wake
			end
			return { 0, expiry, id, fields[1], fields[2] or "0", fields[3] or "0", token, fields[4] or "" }
		end
	end
end
-- lib definitions here
local now = now_ms()
local refused, at, pub, unique, limit = check_settle(KEYS[1], ARGV[3], ARGV[1], now)
if refused then
	return refused
end
-- A chord member's run again whose first run completed the group (and
-- so left the task unsettled, its outcome, this run's ARGV[6],
-- committed) has nothing to do:
-- what the first run sent may have run and been forgotten since.
if ARGV[1] == "1" and ARGV[13] == "1" and redis.call("HGET", KEYS[1], "outcome") == ARGV[6] then
	return 8
end
local t = tonumber(ARGV[12])
local last = #ARGV -- the last item of the next tasks
local take_notify = false
if t > 0 then
	last = last - 3
	take_notify = KEYS[#KEYS - t + 3]
end
local m = tonumber(ARGV[14])
write_state(KEYS[4], ARGV[5], at, pub, "", { unpack(ARGV, 15, 14 + m) })
notify_final(KEYS[4], "SUCCESS")
local key = 5
local chord_due = false
if ARGV[6] ~= "" then
	local finished = record_member(KEYS[5], KEYS[6], KEYS[7], ARGV[2], ARGV[6], ARGV[8], ARGV[7], ARGV[9], ARGV[10])
	chord_due = ARGV[13] == "1" and finished >= tonumber(ARGV[8])
	key = 8
end
local graph = false
if ARGV[15 + m] ~= "" then
	graph = { unpack(KEYS, key, key + 3) }
	key = key + 4
end
local sent_here = false -- a next task sent to the take's queue, not woken for
-- send_next sends a next task (id, message msg, ETA eta in ms, limit,
-- band) to its queue, unless it was sent.
local function send_next(pending, scheduled, archived_key, notify, task_key, state_key, id, msg, eta, limit, band)
	local busy, archived = held(task_key)
	local started = false
	if ARGV[11] == "1" then
		local st = redis.call("HGET", state_key, "state")
		started = st and st ~= "PENDING"
	end
	if busy or started then
		return
	end
	-- A state of an earlier task with its id, or the PENDING its
	-- workflow wrote, gives way to the one its hash implies.
	redis.call("DEL", state_key)
	-- Its pub is the settle's fencing token, unique to this send: its
	-- states keep it (enqueue.lua's ran_since).
	local ready = put(pending, scheduled, archived_key, task_key, id, msg, eta, archived, ARGV[3], now, band)
	if limit ~= "" then
		redis.call("HSET", task_key, "limit", limit)
	end
	-- A next task the take below takes needs no wake-up; one it
	-- leaves gets it after the take.
	if ready and notify ~= take_notify then
		wake(notify)
	elseif ready then
		sent_here = true
	end
end
for i = 18 + m, last, 5 do
	local pending, scheduled, archived_key, notify, task_key, state_key = unpack(KEYS, key, key + 5)
	key = key + 6
	send_next(pending, scheduled, archived_key, notify, task_key, state_key, ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], ARGV[i + 4])
end
if graph then
	local ready = graph_done(graph, ARGV[15 + m], ARGV[16 + m], tonumber(ARGV[17 + m]))
	if ready ~= -1 then
		local queues, sp = {}, false
		for j = 2, #ready, 6 do
			local id, q = ready[j], ready[j + 1]
			local qk = queues[q]
			if not qk then
				qk = cjson.decode(redis.call("HGET", graph[1], "q:" .. q))
				queues[q] = qk
				sp = sp or redis.call("HGET", graph[1], "sp")
			end
			send_next(qk[1], qk[2], qk[3], qk[4], qk[5] .. id, sp .. id, id, ready[j + 2], tonumber(ready[j + 3]), ready[j + 4], ready[j + 5])
		end
	end
end
if chord_due then
	redis.call("HSET", KEYS[1], "outcome", ARGV[6])
	if sent_here then
		wake(take_notify) -- no take follows
	end
	return 8
end
forget(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3], tonumber(ARGV[4]), now, unique, limit)
if t == 0 then
	return 0
end
local first = #KEYS - t + 1
local expiry = now + tonumber(ARGV[#ARGV - 1])
local out = {0, expiry}
local rerouted, names = false, false
if t == 5 then
	rerouted, names = KEYS[first + 3], KEYS[first + 4]
end
take_tasks(out, 1, ARGV[#ARGV - 2], KEYS[first], KEYS[first + 1], KEYS[2], false, rerouted, names, #ARGV, now, expiry)
if sent_here and band_any(KEYS[first]) then
	wake(take_notify)
end
return out
