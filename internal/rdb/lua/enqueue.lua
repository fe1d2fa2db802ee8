-- enqueue: publish tasks to one queue, all or nothing.
--
-- KEYS[1] pending list      KEYS[2] scheduled zset
-- KEYS[3] archived zset     KEYS[4] notify list (wake-up tokens)
-- ARGV[1] task hash key prefix ("<prefix>:{<queue>}:t:")
-- ARGV[2..] triples: task id, message (JSON signature), ETA in ms since the
--           epoch (0: now)
--
-- Returns: {0} when every task was published, or {1, id} when a task with
-- that id is still held by the queue (pending, scheduled, retry or active)
-- or appears twice in ARGV; then nothing was written. A task whose id is
-- archived replaces it.
-- Complexity: O(N log M) for N tasks and M scheduled tasks.
local now = now_ms()
local seen, archived = {}, {}
for i = 2, #ARGV, 3 do
	local id = ARGV[i]
	local state = redis.call("HGET", ARGV[1] .. id, "state")
	if seen[id] or (state and state ~= "archived") then
		return {1, id}
	end
	seen[id] = true
	archived[id] = state == "archived"
end
local ready = 0
for i = 2, #ARGV, 3 do
	local id, msg, eta = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
	local key = ARGV[1] .. id
	if archived[id] then
		redis.call("ZREM", KEYS[3], id)
		redis.call("DEL", key)
	end
	if eta > now then
		redis.call("HSET", key, "msg", msg, "state", "scheduled", "process_at", eta)
		redis.call("ZADD", KEYS[2], eta, id)
	else
		redis.call("HSET", key, "msg", msg, "state", "pending")
		redis.call("RPUSH", KEYS[1], id)
		ready = ready + 1
	end
end
if ready > 0 and redis.call("LLEN", KEYS[4]) == 0 then
	redis.call("LPUSH", KEYS[4], "1")
end
return {0}
