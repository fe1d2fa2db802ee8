-- write_state sets the fields of a task's state hash (fields: a table of
-- field, value pairs), its created_at when it has none and created_at is
-- not "", and its TTL.
local function write_state(key, ttl, created_at, fields)
	redis.call("HSET", key, unpack(fields))
	if created_at ~= "" then
		redis.call("HSETNX", key, "created_at", created_at)
	end
	redis.call("PEXPIRE", key, ttl)
end

-- pending_fields returns the PENDING state fields items (a table of
-- field, value pairs ending with "workflow" and the task's workflow: see
-- rdb's scriptPendingFields) without that last pair when the task belongs
-- to no workflow.
local function pending_fields(items)
	if items[#items] == "" then
		items[#items] = nil
		items[#items] = nil
	end
	return items
end

-- notify_final tells the results waiting on a task (rdb's watch.go) that
-- its state, in hash key, became final: a PUBLISH on the key's own name
-- when state is SUCCESS or FAILURE. A single server only: on a Cluster a
-- PUBLISH goes to every node, and waits there poll.
local function notify_final(key, state)
	if state == "SUCCESS" or state == "FAILURE" then
		redis.call("PUBLISH", key, "")
	end
end
