-- enqueue: publish tasks to one queue, all or nothing, with their PENDING
-- states when the state hashes are given.
--
-- KEYS[1] pending list      KEYS[2] scheduled zset
-- KEYS[3] archived zset     KEYS[4] notify list (wake-up tokens)
-- KEYS[5..] the tasks' state hashes, one per task, in ARGV's order
--           (optional: on a single server only)
-- ARGV[1] task hash key prefix ("<prefix>:{<queue>}:t:")
-- ARGV[2] state TTL in ms
-- ARGV[3] k, how many state field, value items each task has (0 without
--         KEYS[5..])
-- ARGV[4..] for each task: id, message (JSON signature), ETA in ms since
--           the epoch (0: now), then k items: its PENDING state's fields
--
-- Returns: {0} when every task was published, or {1, id} when a task with
-- that id is still held by the queue (lib/queue.lua's held) or appears
-- twice in ARGV; then nothing was written. A task whose id is archived
-- replaces it.
-- Complexity: O(N log M) for N tasks and M scheduled tasks.
local now = now_ms()
local k = tonumber(ARGV[3])
local stride = 3 + k
local seen, archived = {}, {}
for i = 4, #ARGV, stride do
	local id = ARGV[i]
	local busy, was_archived = held(ARGV[1] .. id)
	if seen[id] or busy then
		return {1, id}
	end
	seen[id] = true
	archived[id] = was_archived
end
local ready = false
local n = 4
for i = 4, #ARGV, stride do
	local id = ARGV[i]
	if k > 0 then
		n = n + 1
		write_state(KEYS[n], ARGV[2], "", { unpack(ARGV, i + 3, i + 2 + k) })
	end
	if put(KEYS[1], KEYS[2], KEYS[3], ARGV[1] .. id, id, ARGV[i + 1], tonumber(ARGV[i + 2]), archived[id], now) then
		ready = true
	end
end
if ready then
	wake(KEYS[4])
end
return {0}
