-- write_state sets the fields of a task's state hash (field, value pairs
-- from ARGV[first..]), its created_at when it has none and created_at is
-- not "", and its TTL.
local function write_state(key, ttl, created_at, first)
	local fields = {}
	for i = first, #ARGV do
		table.insert(fields, ARGV[i])
	end
	redis.call("HSET", key, unpack(fields))
	if created_at ~= "" then
		redis.call("HSETNX", key, "created_at", created_at)
	end
	redis.call("PEXPIRE", key, ttl)
end
