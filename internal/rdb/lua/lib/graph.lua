-- graph_ready appends to out the id, queue, message, ETA (ms, 0 for
-- none), limit (lib/limit.lua, "" for none) and band (lib/band.lua, ""
-- for none) of node key of a
-- workflow's graph (nodes hash nodes, res hash res), all of whose deps
-- succeeded: its stored message, with the results of its deps, in the
-- order of its deps, added as ParentResults (tasks.DecodeSignature) unless
-- it is Immutable. The message is spliced as text, not decoded, so that
-- its numbers keep every digit.
local function graph_ready(nodes, res, key, out)
	local node = cjson.decode(redis.call("HGET", nodes, key))
	local msg = node.m
	if not node.i and node.d and #node.d > 0 then
		local results = redis.call("HMGET", res, unpack(node.d))
		for i, r in ipairs(results) do
			results[i] = r or "null"
		end
		msg = string.sub(msg, 1, -2) .. ',"ParentResults":[' .. table.concat(results, ",") .. "]}"
	end
	table.insert(out, node.u)
	table.insert(out, node.q)
	table.insert(out, msg)
	table.insert(out, node.e or 0)
	table.insert(out, node.l or "")
	table.insert(out, node.b or "")
end

-- graph_early is the wait count of a node released before all of its
-- deps finished (tasks.RunNextAtOnce): far enough below 0 that the deps
-- counted down after it never bring it back to 0.
local graph_early = -1000000000

-- graph_done records that node key of a workflow's graph (keys: its
-- graph, nodes, wait and res hashes) finished with results (JSON), keeps
-- the graph's keys ttl ms at least, and returns {1 when this call counted
-- it, 0 when an earlier one did, then graph_ready's items for each
-- successor ready}, or -1 when the graph is gone (graph_done.lua says
-- more). With now (a node allowed to fail, with RunNextAtOnce, that
-- failed), its successors are ready at once, whatever their other deps.
-- ack_success.lua's prelude writes it out for a success that releases no
-- successor: TestAckSuccessPreludeWritesWhatTheLibWrites holds the two
-- together.
local function graph_done(keys, key, results, ttl, now)
	local g = redis.call("HMGET", keys[1], "state", "nodes")
	local state = g[1]
	if not state then
		return -1
	end
	local rec = redis.call("HGET", keys[2], key)
	if not rec then
		return -1
	end
	local first = redis.call("HSETNX", keys[4], key, results) == 1
	local out = { 0 }
	if first then
		out[1] = 1
		local done = redis.call("HINCRBY", keys[1], "done", 1)
		if state == "PENDING" and done >= tonumber(g[2]) then
			state = "SUCCESS"
			redis.call("HSET", keys[1], "state", state)
			redis.call("PUBLISH", keys[1], "")
		end
	end
	keep_alive(keys, ttl) -- RecordGraph gave the four keys one TTL
	if state ~= "PENDING" then
		return out
	end
	local node = cjson.decode(rec)
	for _, s in ipairs(node.s or {}) do
		local left
		if first then
			left = redis.call("HINCRBY", keys[3], s, -1)
			if now and left >= 0 then
				left = graph_early
				redis.call("HSET", keys[3], s, left)
			end
		else
			left = tonumber(redis.call("HGET", keys[3], s))
		end
		if left == 0 or (now and left <= graph_early) then
			graph_ready(keys[2], keys[4], s, out)
		end
	end
	return out
end
