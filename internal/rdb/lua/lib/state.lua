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
