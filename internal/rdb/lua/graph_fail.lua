-- graph_fail: record that a node of a workflow's graph failed for good, or
-- that the workflow was cancelled.
--
-- A node allowed to fail (its record's "f") counts as finished without
-- results, as graph_done counts a success: its successors run without
-- its results, and the workflow goes on; with "f" 2 (RunNextAtOnce) its
-- successors are ready at once. Any other failure, and a
-- cancellation, fails the workflow: no node is released after this
-- (graph_done.lua), and a PUBLISH on the graph hash's name tells whoever
-- waits for it. A graph already final (SUCCESS, or FAILURE by an earlier
-- call) is left as it is.
--
-- KEYS[1] graph hash (meta)   KEYS[2] nodes hash   KEYS[3] wait hash
-- KEYS[4] res hash
-- ARGV[1] the key of the node that failed ("" for a cancellation)
-- ARGV[2] why (the node's error, or the cancellation's reason)
-- ARGV[3] the least TTL of the graph's keys from now, in ms
--
-- Returns: -1 when the graph is gone; 0 when it was final already (but
-- failed by this node: then the lists below again, for a run again);
-- {2, then graph_ready's items for each successor ready} when the node
-- was allowed to fail (as graph_done: on a run again, every successor
-- ready, sent or not); else
-- {1, 1 when the workflow cancels its running nodes on failure (else 0),
-- the number n of nodes sent and not finished (a first node, or one whose
-- deps all succeeded, without results), then n pairs of their id and
-- queue, then for each node not sent: its key, id, task name and, when it
-- has OnError callbacks, its message (else "")}: the caller takes the
-- nodes sent out of their queues, and writes the FAILURE of those not
-- sent.
-- Complexity: O(n) for n nodes with deps, once per workflow.
local state = redis.call("HGET", KEYS[1], "state")
if not state then
	return -1
end
local ttl = tonumber(ARGV[3])
if ARGV[1] ~= "" then
	local rec = redis.call("HGET", KEYS[2], ARGV[1])
	local f = rec and cjson.decode(rec).f
	if f then
		local out = graph_done(KEYS, ARGV[1], "[]", ttl, f == 2)
		if type(out) ~= "table" then
			return out
		end
		if out[1] == 1 then
			redis.call("HINCRBY", KEYS[1], "allowed", 1)
		end
		out[1] = 2
		return out
	end
end
keep_alive({ KEYS[1], KEYS[2], KEYS[3], KEYS[4] }, ttl)
if state == "PENDING" then
	redis.call("HSET", KEYS[1], "state", "FAILURE", "failed", ARGV[1], "error", ARGV[2])
	redis.call("PUBLISH", KEYS[1], "")
elseif ARGV[1] == "" or state ~= "FAILURE" or redis.call("HGET", KEYS[1], "failed") ~= ARGV[1] then
	return 0
end
-- Failed by this node now, or by an earlier run of its settle (the task
-- finished again after a recovery): what to stop is returned again.
local cancel = 0
if redis.call("HGET", KEYS[1], "cf") == "1" then
	cancel = 1
end
local open, unsent = {}, {}
local function unfinished(key)
	if key ~= ARGV[1] and redis.call("HEXISTS", KEYS[4], key) == 0 then
		local node = cjson.decode(redis.call("HGET", KEYS[2], key))
		table.insert(open, node.u)
		table.insert(open, node.q)
	end
end
for _, key in ipairs(cjson.decode(redis.call("HGET", KEYS[1], "first"))) do
	unfinished(key)
end
local wait = redis.call("HGETALL", KEYS[3])
for i = 1, #wait, 2 do
	local left = tonumber(wait[i + 1])
	if left == 0 or left <= graph_early then
		unfinished(wait[i])
	else
		local node = cjson.decode(redis.call("HGET", KEYS[2], wait[i]))
		table.insert(unsent, wait[i])
		table.insert(unsent, node.u)
		table.insert(unsent, node.n or "")
		table.insert(unsent, node.o and node.m or "")
	end
end
local out = { 1, cancel, #open / 2 }
for _, v in ipairs(open) do
	table.insert(out, v)
end
for _, v in ipairs(unsent) do
	table.insert(out, v)
end
return out
