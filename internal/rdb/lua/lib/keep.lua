-- keep_alive makes keys (a table), which were given one TTL together,
-- live at least ttl ms from now, less a minute (less half of ttl, when
-- that is shorter): when the first key's TTL is below that, or with
-- force, every key gets ttl again. Keys a write extends each time are so
-- extended at most once a minute.
local function keep_alive(keys, ttl, force)
	if force or redis.call("PTTL", keys[1]) < ttl - math.min(60000, ttl / 2) then
		for _, key in ipairs(keys) do
			redis.call("PEXPIRE", key, ttl)
		end
	end
end
