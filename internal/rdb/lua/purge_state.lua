-- purge_state: delete a task's state, on a single server, so that
-- GetState then finds none, as machinery's PurgeState does. Deleting the
-- state hash is not enough for a task its queue still holds, whose hash
-- implies a state (get_state.lua): the purge records in that hash the
-- class of its state (purged: lib/queue.lua's implied_by), and
-- get_state.lua reads no state from it while its state stays in that
-- class. The task is not touched otherwise: a purged task that waits
-- still runs when a worker takes it, reads as PENDING from then on, and
-- the states its worker writes read as usual. Archived from the queue
-- later, it reads as failed; requeued from the archive, as pending. Safe to
-- run twice.
--
-- KEYS[1] the task's state hash   KEYS[2] the set of queue names
-- ARGV[1] the queues' key prefix ("<prefix>:{"): a queue's task hash is
--         ARGV[1] .. queue .. "}:t:" .. id
-- ARGV[2] the task id
--
-- Returns how many task hashes (one per queue that holds a task with the
-- id) it marked.
-- Complexity: O(Q) for Q queues.
redis.call("DEL", KEYS[1])
local marked = 0
for _, q in ipairs(redis.call("SMEMBERS", KEYS[2])) do
	local key = ARGV[1] .. q .. "}:t:" .. ARGV[2]
	local _, class = implied_by(key)
	if class then
		redis.call("HSET", key, "purged", class)
		marked = marked + 1
	end
end
return marked
