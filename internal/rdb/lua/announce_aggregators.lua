-- announce_aggregators: a worker alive aggregates these task names on this
-- queue, with these policies, for the next ttl (lib/aggregate.lua). A
-- name's announcement lasts until the latest it was announced to; its
-- policy is the last announced, and when that changes every group of the
-- name is filed again by it.
--
-- KEYS[1] policies hash (P .. "policies")   KEYS[2] groups set (P .. "groups")
-- ARGV[1] aggregation prefix P ("<prefix>:{<queue>}:agg:")
-- ARGV[2] ttl in ms
-- ARGV[3..] for each name: the name, then its policy as "<max size>
--           <max delay ms> <grace period ms>"
--
-- Returns: 0.
-- Complexity: O(N) for N names, plus O(G log M) for the G groups of the
-- queue when a name's policy changed.
local now = now_ms()
local P = ARGV[1]
local till = now + tonumber(ARGV[2])
for i = 3, #ARGV, 2 do
	local name, rule = ARGV[i], ARGV[i + 1]
	local old = agg_policy(P, name)
	local t = till
	if old and old.till > t then
		t = old.till
	end
	redis.call("HSET", KEYS[1], name, string.format("%d", t) .. " " .. rule)
	if not old or old.rule ~= rule then
		for _, g in ipairs(redis.call("SMEMBERS", KEYS[2])) do
			if agg_split(g) == name then
				agg_schedule(P, g)
			end
		end
	end
end
return 0
