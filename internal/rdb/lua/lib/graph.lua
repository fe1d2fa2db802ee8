-- graph_keep makes each of the keys of a workflow's graph (a table)
-- live at least ttl ms from now.
local function graph_keep(keys, ttl)
	for i = 1, 4 do
		if redis.call("PTTL", keys[i]) < ttl then
			redis.call("PEXPIRE", keys[i], ttl)
		end
	end
end

-- graph_ready appends to out the id, queue and message of node key of a
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
end
