-- graph_fail: fail a workflow's graph, because one of its nodes failed
-- for good or the workflow was cancelled: no node is released after this
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
-- Returns: -1 when the graph is gone; 0 when it was final already; else
-- {1, then the id and queue of each node sent and not finished (a first
-- node, or one whose deps all succeeded, without results)}: the caller
-- takes those still waiting in their queues out of them.
-- Complexity: O(n) for n nodes with deps, once per workflow.
local state = redis.call("HGET", KEYS[1], "state")
if not state then
	return -1
end
graph_keep(KEYS, tonumber(ARGV[3]))
if state ~= "PENDING" then
	return 0
end
redis.call("HSET", KEYS[1], "state", "FAILURE", "failed", ARGV[1], "error", ARGV[2])
redis.call("PUBLISH", KEYS[1], "")
local out = { 1 }
local function unfinished(key)
	if key ~= ARGV[1] and redis.call("HEXISTS", KEYS[4], key) == 0 then
		local node = cjson.decode(redis.call("HGET", KEYS[2], key))
		table.insert(out, node.u)
		table.insert(out, node.q)
	end
end
for _, key in ipairs(cjson.decode(redis.call("HGET", KEYS[1], "first"))) do
	unfinished(key)
end
local wait = redis.call("HGETALL", KEYS[3])
for i = 1, #wait, 2 do
	if wait[i + 1] == "0" then
		unfinished(wait[i])
	end
end
return out
