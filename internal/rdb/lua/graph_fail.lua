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
-- Returns: -1 when the graph is gone; 1 when this call failed it, 0 when
-- it was final already.
-- Complexity: O(1).
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
return 1
