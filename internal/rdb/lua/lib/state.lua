-- write_state sets the fields of a task's state hash (field, value pairs
-- from ARGV[first..]), its created_at when it has none, and its TTL.
local function write_state(key, ttl, created_at, first)
	local fields = {}
	for i = first, #ARGV do
		table.insert(fields, ARGV[i])
	end
	redis.call("HSET", key, unpack(fields))
	redis.call("HSETNX", key, "created_at", created_at)
	redis.call("PEXPIRE", key, ttl)
end
