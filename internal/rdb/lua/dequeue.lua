-- dequeue: take up to N pending tasks of one queue under fresh leases:
-- first tasks rerouted to the caller's names (reroute.lua), then the
-- pending list. A limited task (its hash's limit) over its key's
-- concurrency is parked on its key, one over its rate scheduled at the
-- slot it books (lib/limit.lua's limit_admit); either way it is not
-- taken, and the next id is tried (lib/queue.lua's take_tasks). So is an
-- id whose task is gone or does not wait (its state is not "pending": a
-- second entry of an id taken already), which is dropped.
--
-- KEYS[1] pending list   KEYS[2] paused flag   KEYS[3] lease zset
-- KEYS[4] notify list
-- KEYS[5] rerouted set (each name's list is KEYS[5] .. ":" .. name) and
-- KEYS[6] the caller's names set (announce.lua): both or neither; without
-- them no rerouted task is taken.
-- ARGV[1] task hash key prefix
-- ARGV[2] N, the most tasks to take
-- ARGV[3] lease duration in ms
-- ARGV[4..] N fencing tokens, one per task taken
--
-- Returns: {expiry_ms, id1, msg1, retried1, recovered1, token1, outcome1,
-- id2, ...} (outcome: what an earlier holder committed, "" for none); just
-- {expiry_ms} when the queue is paused or nothing was taken, {0} when it
-- has nothing to take. The lease expiry is the server's time plus the
-- duration. When tasks remain pending, a wake-up token is left for the
-- next idle worker.
-- Complexity: O(N log L) for L leased tasks, plus O(R) for R names with
-- rerouted tasks when there are any.

-- A queue with nothing to take, what an idle worker's fetch finds each
-- time its block times out, costs one EXISTS (of its pending list, its
-- bands' levels, lib/band.lua, and, with names, the rerouted set), before
-- the lib definitions and with no clock read.
local levels = KEYS[1] .. ":levels"
if (#KEYS < 6 and redis.call("EXISTS", KEYS[1], levels) or redis.call("EXISTS", KEYS[1], levels, KEYS[5])) == 0 then
	return { 0 }
end
-- lib definitions here
local now = now_ms()
local expiry = now + tonumber(ARGV[3])
local out = {expiry}
local rerouted, names = false, false
if #KEYS >= 6 then
	rerouted, names = KEYS[5], KEYS[6]
end
take_tasks(out, tonumber(ARGV[2]), ARGV[1], KEYS[1], KEYS[2], KEYS[3], KEYS[4], rerouted, names, 4, now, expiry)
return out
