-- take_all: an operator's action on up to N of a queue's tasks in one
-- status, as take_waiting.lua's on each, taken off the status's own list
-- or zset rather than looked for: "delete" them (they never run),
-- "archive" them with a reason, or "run" scheduled or retrying tasks now
-- (each becomes pending at the tail of its band's list, or joins its
-- aggregation group). Pending tasks are taken in the order they would
-- run (lib/band.lua's band_pop), then those rerouted to the workers that
-- have their names; a task recovered after its outcome was committed
-- (being finished, not waiting) is put back where it was. An entry whose
-- task is gone or no longer in the status is dropped.
--
-- KEYS[1] pending list   KEYS[2] scheduled zset   KEYS[3] retry zset
-- KEYS[4] archived zset  KEYS[5] parked zset      KEYS[6] notify list
-- KEYS[7] rerouted set (a name's list is KEYS[7] .. ":" .. name)
-- ARGV[1] task hash key prefix (the queue's aggregation keys are found
--         from it)
-- ARGV[2] the status: "pending", "scheduled", "retry" or "limited"
-- ARGV[3] "delete", "archive" or "run" (scheduled or retry only)
-- ARGV[4] N   ARGV[5] the reason (archive)
-- ARGV[6] maximum age of dead letters in ms   ARGV[7] their maximum number
--
-- Returns: {left, id1, msg1, id2, msg2, ...}: the tasks acted on, each
-- with its message; left is 1 when the status has entries left (a caller
-- taking them all stops at a call that acted on none: what is left is
-- being finished).
-- Complexity: O(N log M) for M tasks in the status, plus, for parked
-- tasks, the LREM of each from its key's wait list (at its head when
-- they are taken in the order they were parked).
local now = now_ms()
local prefix, status, action, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local zsets = { scheduled = KEYS[2], retry = KEYS[3], limited = KEYS[5] }
local out = { 0 }
local P = action == "run" and agg_prefix(prefix)
local joined, ready = {}, false
local back = {} -- pending tasks being finished, to put back

local banded = status == "pending" and redis.call("EXISTS", KEYS[1] .. ":levels") == 1

-- next_id returns the next id of the status, false for none.
local ids, at = nil, 0
local function next_id()
	if status ~= "pending" then
		if not ids then
			ids = redis.call("ZRANGE", zsets[status], 0, n - 1)
		end
		at = at + 1
		return ids[at] or false
	end
	local id
	if banded then
		id = band_pop(KEYS[1])
	else
		id = redis.call("LPOP", KEYS[1])
	end
	if id then
		return id
	end
	for _, name in ipairs(redis.call("SMEMBERS", KEYS[7])) do
		local list = KEYS[7] .. ":" .. name
		id = redis.call("LPOP", list)
		if redis.call("EXISTS", list) == 0 then
			redis.call("SREM", KEYS[7], name)
		end
		if id then
			return id
		end
	end
	return false
end

for _ = 1, n do
	local id = next_id()
	if not id then
		break
	end
	local key = prefix .. id
	local t = redis.call("HMGET", key, "state", "msg", "group", "outcome", "band")
	local taken = t[1] == status and not t[4]
	if status == "pending" and t[1] == status and t[4] then
		table.insert(back, { id, t[5] })
	elseif status == "limited" and taken then
		limit_unplace(key, id)
	elseif status ~= "pending" and (taken or t[1] ~= status) then
		redis.call("ZREM", zsets[status], id)
	end
	if taken then
		take_out(key, id, action, t[3], t[5], false, ARGV[5], now, KEYS[1], KEYS[4], P)
		if action == "run" then
			if t[3] then
				joined[t[3]] = true
			else
				ready = true
			end
		end
		table.insert(out, id)
		table.insert(out, t[2])
	end
end
for i = #back, 1, -1 do
	redis.call("HDEL", prefix .. back[i][1], "rerouted")
	band_push(KEYS[1], back[i][2], back[i][1], true)
end
if action == "archive" then
	trim_archive(KEYS[4], prefix, now, tonumber(ARGV[6]), tonumber(ARGV[7]))
elseif action == "run" then
	agg_file(P, joined, now)
	if ready then
		wake(KEYS[6])
	end
end
if status == "pending" then
	out[1] = (band_any(KEYS[1]) or redis.call("EXISTS", KEYS[7]) == 1) and 1 or 0
else
	out[1] = redis.call("ZCARD", zsets[status]) > 0 and 1 or 0
end
return out
