-- write_state sets the fields of a task's state hash (fields: a table of
-- field, value pairs) and its TTL, and its created_at (ms since the
-- epoch): at, the task hash's send time, when the task has one (it is
-- the task's created_at, whatever the hash holds), else created_at when
-- the hash has none and it is not "". With pub (the token of the publish
-- that sent the task, from its hash), the state keeps it: a publish sent
-- again after a lost reply finds it (enqueue.lua's ran_since).
local function write_state(key, ttl, at, pub, created_at, fields)
	if at then
		table.insert(fields, "created_at")
		table.insert(fields, at)
	end
	if pub then
		table.insert(fields, "pub")
		table.insert(fields, pub)
	end
	redis.call("HSET", key, unpack(fields))
	if not at and created_at ~= "" then
		redis.call("HSETNX", key, "created_at", created_at)
	end
	redis.call("PEXPIRE", key, ttl)
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
