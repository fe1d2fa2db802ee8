// Package redisbackend is machinist's Redis result backend: task states and
// results, and the bookkeeping of groups and chords. It passes the
// conformance suite (backends/backendtest) on a standalone Redis, on Redis
// Cluster and on the in-process engine of "memory://" (backends/memory).
// It is a thin adapter over the Redis store in internal/rdb, which owns every
// key and script; NewServer builds it with the broker on one store when both
// are on the same Redis.
//
//	be, err := redisbackend.Dial("redis://localhost:6379", cnf.WithDefaults())
//	defer be.Close()
//
// machinery's constructors, New(cnf, host, password, socketPath, db) and
// NewGR(cnf, addrs, db), make the same backend, for a program that builds
// its backend by hand.
//
// # Keys
//
// Every key starts with Config.Redis.KeyPrefix ("machinist" by default):
//
//	<prefix>:state:<taskUUID>       hash: state, name, results, error, created_at,
//	                                workflow, aggregate, pub
//	<prefix>:{<groupUUID>}:group    hash: uuids, count, trig, created_at
//	<prefix>:{<groupUUID>}:done     hash: member UUID → JSON TaskState
//	<prefix>:{<groupUUID>}:order    list: member UUIDs in the order they first finished
//
// A task's state hash holds its latest state: state (PENDING, STARTED,
// RETRY, SUCCESS, FAILURE; machinist's worker writes no RECEIVED), name,
// results (the JSON of its []*TaskResult, "null" for none), error, and
// created_at (ms since the epoch; RFC 3339 as earlier versions wrote it is
// read too): set by the PENDING write, or by the first write when there
// was none, so it is when the task was sent; the workflow the task belongs
// to, the aggregate an aggregation member joined, and pub, the token of
// the publish that sent it (on a single server, kept by a state written
// while the task's hash is in its queue).
//
// A group's keys share the hash tag {groupUUID}, so they live in one Redis
// Cluster slot and one Lua script can read and write them all; a group UUID
// therefore must not contain braces. The group hash has the members in
// group order (uuids, a JSON array, written by InitGroup), how many members
// the group waits for (count), the member elected to send the chord callback
// (trig) and when the group was created (created_at). The done hash has the
// final state of each finished member; its length is the number of finished
// members. The order list remembers the order in which members first
// finished, for members InitGroup did not list (a group that was never
// initialised lists its members in that order).
//
// # Writes
//
// Writes go through the store's batcher (shared with the broker when both
// are on one Redis), so the writes of concurrent tasks share round trips,
// and the writes of one task go out in the order they were made. Each
// SetState* call is one round trip: for PENDING, HSET of every field with
// created_at, and PEXPIRE; for the other states the script set_state.lua,
// which writes no state over a final one unless it is final itself, sets
// created_at (on a single server from the task's hash: when it was sent;
// else the first write's time), and announces a final state to the results
// waiting on it.
// SetStatePending checks and encodes every signature first, then writes
// 1000 per pipeline. SetStateStarted queues its write and returns without
// waiting; GetState goes through the same task's lane of the batcher, so
// this backend's reads follow its writes. SetStateSuccess, SetStateFailure
// and CompleteGroupMember of a signature with a GroupUUID add, to the same
// pipeline, the script group_done.lua, which records the member's final
// state in the done hash (a member that finishes again replaces its state
// and counts once), creates the group with count GroupTaskCount if
// InitGroup was not called, sets the group's expiry, and returns how many
// members have finished, from which CompleteGroupMember answers whether the
// group is complete. The scripts are loaded once per backend before they
// are used in a pipeline, and again if Redis lost them.
//
// On a single Redis server, a broker on the same store writes some states
// itself (it joins the backend): a task's SUCCESS state goes in the
// acknowledgement script, fenced by the task's lease. Its PENDING state is
// not written at all: the task's hash in its queue says it (with when it
// was sent, at: by the sender's clock for a task due now, by Redis's for
// one with an ETA or an aggregation member), and GetState of a task with
// no state hash reads it from there (get_state.lua, which looks in each
// queue of the store: O(queues) for such a task). The first state its
// worker writes starts its state hash, with created_at taken from the task
// hash; a PENDING state so kept never expires while the task waits.
// PurgeState of such a task marks its hash (purge_state.lua): GetState
// then finds no state while the task waits, as with machinery, and finds
// one again once a worker takes it.
//
// Results are stored as JSON. GetState decodes them with UseNumber, so a
// value comes back as JSON gives it: numbers as json.Number, slices as
// []interface{}, a []byte as its base64 string. tasks.ReflectTaskResults
// turns them back into the task's types. A result JSON cannot encode (a
// channel, a function, NaN) fails the write, and nothing is written.
//
// # Expiry
//
// A task's state expires ResultsExpireIn seconds after its latest write
// (an implicit PENDING state lasts as long as the task waits).
//
// A group's keys expire ResultsExpireIn after their last write once every
// member has finished. While members are unfinished they live
// max(ResultsExpireIn, GroupSafetyTTL) (30 days) after the last write: the
// bookkeeping of a slow group does not expire under it, and a group
// abandoned forever (a member lost for good) does not stay in Redis for
// ever. Each write to the group (InitGroup, a member finishing, the chord
// election) sets the TTL of all its keys again from what it then holds.
//
// # Groups and chords
//
// GroupCompleted reads the length of the done hash (with EXISTS of the group
// hash, in one pipeline): O(1) and one round trip however large the group;
// it reads no member's state. A group with no bookkeeping is not completed.
//
// GroupTaskStates reads the group hash, the order list and the done hash in
// one MULTI and returns the recorded states in group order, with a PENDING
// state carrying only the UUID for members not finished. It does not read
// the members' own states, which may have expired or been purged.
//
// TriggerChord runs trigger_chord.lua: if the group hash has no trig it
// sets it to the asking member and answers true; if trig is that member it
// answers true again (a member that died before sending the callback sends
// it when it runs again); otherwise false. So exactly one member per group
// sends the callback, with O(1) work, no lock and no polling, however many
// members ask at once. GroupTaskStates and TriggerChord of a group without
// bookkeeping (never created, purged or expired) fail with an error wrapping
// iface.ErrGroupNotFound.
//
// # Errors and closing
//
// Errors start with "redisbackend:", name the task or group, and wrap the
// cause with %w: iface.ErrStateNotFound, iface.ErrGroupNotFound,
// iface.ErrClosed, or the client's error (redis.Nil never escapes). Close
// makes later calls fail with iface.ErrClosed and closes the client only
// when Params.OwnsClient is set.
package redisbackend
