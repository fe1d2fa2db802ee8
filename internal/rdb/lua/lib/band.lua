-- Bands: the parts of a queue's pending tasks by priority level and fair
-- key. A task of level 0 without a fair key (most tasks) waits on the
-- pending list itself and has no band; any other has a band,
-- "<level>" or "<level>:<fair key>" (level 1 to 9; rdb's bandItem), kept
-- in its hash's band field, and waits on its band's list, pending .. ":"
-- .. band. Beside them:
--   pending .. ":levels"          zset: the levels with tasks on a band's
--                                 list (a level 0 only while it has fair
--                                 keys), scored 2 × level, plus 1 while
--                                 the level has fair keys
--   pending .. ":fair:" .. level  zset: the fair keys of the level with
--                                 tasks, scored by their pass (the turn
--                                 each is due to be served at), and ""
--                                 for the level's list without a key
--                                 while it has tasks too
-- A band whose list has tasks is always registered there; one registered
-- whose list is empty is dropped when met.

-- band_list returns the list that tasks of band (false or "" for none)
-- wait on.
local function band_list(pending, band)
	if not band or band == "" then
		return pending
	end
	return pending .. ":" .. band
end

-- band_split returns band's level and fair key ("" for none).
local function band_split(band)
	if not band or band == "" then
		return "0", ""
	end
	local cut = string.find(band, ":", 1, true)
	if not cut then
		return band, ""
	end
	return string.sub(band, 1, cut - 1), string.sub(band, cut + 1)
end

-- band_join puts key into the rotation of fair zset half a turn after
-- the key due now (its head), after the keys due this turn, unless it is
-- there: a key that comes back gets no credit for the time it had no
-- task, and one whose tasks run out at every turn cannot keep the others
-- from theirs.
local function band_join(fair, key)
	local head = redis.call("ZRANGE", fair, 0, 0, "WITHSCORES")
	redis.call("ZADD", fair, "NX", head[2] and tonumber(head[2]) + 0.5 or 0, key)
end

-- band_push puts task id on its band's list, at the tail, or at the head
-- with front (a task taken back: it keeps its turn), registering the
-- band when its list was empty. A task with no band costs one push.
local function band_push(pending, band, id, front)
	local list = band_list(pending, band)
	if redis.call(front and "LPUSH" or "RPUSH", list, id) > 1 or list == pending then
		return
	end
	local level, key = band_split(band)
	if key == "" then
		redis.call("ZADD", pending .. ":levels", "NX", 2 * tonumber(level), level)
		return
	end
	redis.call("ZADD", pending .. ":levels", 2 * tonumber(level) + 1, level)
	band_join(pending .. ":fair:" .. level, key)
end

-- band_drop takes band, whose list is empty, out of the rotation, and
-- its level out of the levels when nothing of it is left.
local function band_drop(pending, band)
	local level, key = band_split(band)
	local fair = pending .. ":fair:" .. level
	redis.call("ZREM", fair, key)
	if redis.call("EXISTS", fair) == 1 then
		return
	end
	if level == "0" or redis.call("EXISTS", pending .. ":" .. level) == 0 then
		redis.call("ZREM", pending .. ":levels", level)
	else
		redis.call("ZADD", pending .. ":levels", "XX", 2 * tonumber(level), level)
	end
end

-- band_remove takes task id off its band's list.
local function band_remove(pending, band, id)
	local list = band_list(pending, band)
	redis.call("LREM", list, 1, id)
	if list ~= pending and redis.call("EXISTS", list) == 0 then
		band_drop(pending, band)
	end
end

-- band_any reports whether the queue has a task pending: one EXISTS.
local function band_any(pending)
	return redis.call("EXISTS", pending, pending .. ":levels") > 0
end

-- band_pop takes the next id off the queue's pending tasks, false for
-- none: from the highest level with tasks; within it, from the fair key
-- whose turn it is (the tasks without a key take theirs as one more key),
-- round robin, each key's in the order they were sent. With no band
-- registered, it is a ZREVRANGE of the levels, then an LPOP of the
-- pending list.
-- Complexity: O(log K) for K fair keys at the level.
local function band_pop(pending)
	local levels = pending .. ":levels"
	while true do
		local first = redis.call("ZREVRANGE", levels, 0, 0, "WITHSCORES")
		local top = first[1]
		if not top then
			return redis.call("LPOP", pending)
		end
		local plain = top == "0" and pending or pending .. ":" .. top
		local fair = pending .. ":fair:" .. top
		local head = {}
		if tonumber(first[2]) % 2 == 1 then
			head = redis.call("ZRANGE", fair, 0, 0, "WITHSCORES")
		end
		if #head == 0 and top == "0" then
			-- Level 0 with no fair key left: its tasks are the pending
			-- list's, below every other level.
			redis.call("ZREM", levels, "0")
		else
			if #head > 0 and head[1] ~= "" and redis.call("EXISTS", plain) == 1 then
				band_join(fair, "")
			end
			local key = head[1] or ""
			local band = key ~= "" and top .. ":" .. key or top ~= "0" and top or false
			local list = band_list(pending, band)
			local id = redis.call("LPOP", list)
			if redis.call("EXISTS", list) == 0 then
				band_drop(pending, band)
			elseif #head > 0 then
				redis.call("ZADD", fair, "XX", tonumber(head[2]) + 1, key)
			end
			if id then
				return id
			end
		end
	end
end
