-- graph_done: record that a node of a workflow's graph succeeded, and
-- return the nodes that follow it and are ready: each whose deps have all
-- succeeded, with the results of its deps added to its message.
--
-- A node's success is counted once (its results go in the res hash with
-- HSETNX), and each dep counted down in its successors' wait counts only
-- then, so each join is released exactly once however often this runs.
-- A run again (the node's task finished again after a recovery) counts
-- nothing and returns the successors that are ready, whoever released
-- them: the caller sends each unless it was sent before.
--
-- KEYS[1] graph hash (meta)   KEYS[2] nodes hash   KEYS[3] wait hash
-- KEYS[4] res hash
-- ARGV[1] the node's key
-- ARGV[2] its results (JSON array of TaskResult)
-- ARGV[3] the least TTL of the graph's keys from now, in ms
--
-- Returns: -1 when the graph is gone (it expired, or was never recorded);
-- else {1 when this run counted the success (0 when an earlier one did),
-- then for each successor ready: its id, queue and message}. A workflow
-- that failed releases nothing. A workflow whose last node this is
-- becomes SUCCESS, and a PUBLISH on the graph hash's name tells whoever
-- waits for it.
-- Complexity: O(s + d) for s successors with d deps in all.
local state = redis.call("HGET", KEYS[1], "state")
if not state then
	return -1
end
local rec = redis.call("HGET", KEYS[2], ARGV[1])
if not rec then
	return -1
end
local first = redis.call("HSETNX", KEYS[4], ARGV[1], ARGV[2]) == 1
local out = { 0 }
if first then
	out[1] = 1
	local done = redis.call("HINCRBY", KEYS[1], "done", 1)
	if state == "PENDING" and done >= tonumber(redis.call("HGET", KEYS[1], "nodes")) then
		state = "SUCCESS"
		redis.call("HSET", KEYS[1], "state", state)
		redis.call("PUBLISH", KEYS[1], "")
	end
end
graph_keep(KEYS, tonumber(ARGV[3]))
if state ~= "PENDING" then
	return out
end
local node = cjson.decode(rec)
for _, s in ipairs(node.s or {}) do
	local left
	if first then
		left = redis.call("HINCRBY", KEYS[3], s, -1)
	else
		left = tonumber(redis.call("HGET", KEYS[3], s))
	end
	if left == 0 then
		graph_ready(KEYS[2], KEYS[4], s, out)
	end
end
return out
