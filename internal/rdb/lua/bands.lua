-- bands: the lists a queue's pending tasks wait on (lib/band.lua), in
-- the order they are served: by level, highest first; within a level, by
-- turn, the list without a key taking its turn as one more key (first
-- when it is not in the rotation yet). For inspection.
--
-- KEYS[1] pending list
--
-- Returns: {band1, length1, band2, length2, ...}, each band as
-- lib/band.lua names it ("" for the pending list itself, level 0 without
-- a key), only those with tasks.
-- Complexity: O(B) for B bands with tasks.
local pending = KEYS[1]
local out = {}
local function add(band)
	local n = redis.call("LLEN", band_list(pending, band))
	if n > 0 then
		table.insert(out, band)
		table.insert(out, n)
	end
end
local levels = redis.call("ZREVRANGE", pending .. ":levels", 0, -1)
local zero = false
for _, level in ipairs(levels) do
	zero = zero or level == "0"
	local plain = level == "0" and "" or level
	local keys = redis.call("ZRANGE", pending .. ":fair:" .. level, 0, -1)
	if not redis.call("ZSCORE", pending .. ":fair:" .. level, "") then
		add(plain)
	end
	for _, key in ipairs(keys) do
		add(key == "" and plain or level .. ":" .. key)
	end
end
if not zero then
	add("")
end
return out
