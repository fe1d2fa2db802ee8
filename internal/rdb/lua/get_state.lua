-- get_state: read a task's state. A task has a state hash once a state
-- was written; before that, on a single server, a task its queue holds is
-- PENDING (enqueue.lua writes no PENDING state): the task hash says so,
-- found by the task id among the hashes of the queues. A task archived
-- before any state was written (by an operator, or an aggregation member
-- whose batch failed, before its FAILURE lands) has failed, with the
-- reason its hash keeps; so has a task cancelled while it waited, whose
-- hash (cancel.lua's marker, with when it was sent) keeps it out. A
-- marker that keeps out a task not sent yet implies nothing: its
-- canceller writes its FAILURE. Nor does a task whose state was purged
-- (purge_state.lua) while its hash's state is of the class it had then
-- (lib/queue.lua's implied_by): a task purged while it waits reads as
-- none until a worker takes it.
--
-- KEYS[1] the task's state hash   KEYS[2] the set of queue names
-- ARGV[1] the queues' key prefix ("<prefix>:{"): a queue's task hash is
--         ARGV[1] .. queue .. "}:t:" .. id
-- ARGV[2] the task id
-- ARGV[3] the queue to look in first, the one the task was sent to ("" when
--         not known)
--
-- A state hash read with ARGV[3] gets the progress the running task keeps
-- in its hash (x:progress, rdb's taskdata.go) as its "progress" field,
-- when it has none of its own (a final state carries its last).
--
-- Returns {1, field, value, ...}: the state hash; {2, msg, at, state,
-- error}: a task with no state hash that its queue holds, its message,
-- when it was sent (ms since the epoch, "" when unknown), and its state
-- (PENDING, or FAILURE with its error when archived or cancelled); {0}:
-- neither.
-- Complexity: O(1) with a state or a task found in ARGV[3], else O(Q) for
-- Q queues.
local h = redis.call("HGETALL", KEYS[1])
if #h > 0 then
	if ARGV[3] ~= "" then
		local own = false
		for i = 1, #h, 2 do
			own = own or h[i] == "progress"
		end
		local p = not own and redis.call("HGET", ARGV[1] .. ARGV[3] .. "}:t:" .. ARGV[2], "x:progress")
		if p then
			table.insert(h, "progress")
			table.insert(h, p)
		end
	end
	table.insert(h, 1, 1)
	return h
end
-- implied reads a task hash: the reply for the task it holds, nil for
-- none (or a completed task, whose state expired or was never written, a
-- marker keeping out a task not sent yet, or a task purged since it
-- entered its hash's present class of state).
local function implied(q)
	local implicit, class, t = implied_by(ARGV[1] .. q .. "}:t:" .. ARGV[2])
	if not implicit or t[6] == class then
		return nil
	end
	local reason = ""
	if implicit == "FAILURE" then
		reason = t[5] or ""
	end
	return {2, t[2] or "", sent_at(t[3], t[4]) or "", implicit, reason}
end
if ARGV[3] ~= "" then
	local found = implied(ARGV[3])
	if found then
		return found
	end
end
for _, q in ipairs(redis.call("SMEMBERS", KEYS[2])) do
	if q ~= ARGV[3] then
		local found = implied(q)
		if found then
			return found
		end
	end
end
return {0}
