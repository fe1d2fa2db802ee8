// Package memory is an in-process result backend written in Go: eager
// mode's, and what New returns. "memory://" is not this backend: it runs
// the Redis backend's store on an in-process engine. This one has the
// semantics of the Redis backend and passes the same conformance suite
// (backends/backendtest).
//
//	be := memory.New(memory.OptionsFrom(cnf.WithDefaults()))
//	defer be.Close()
//
// # States
//
// Each SetState* call replaces the task's state with a new one that expires
// ResultsExpireIn seconds later; CreatedAt is that of the state it replaces
// (the PENDING write's: when the task was sent), or, for a PENDING write or
// a first write, the time of the write. GetState
// of a state that was never written, was purged or has expired fails with an
// error wrapping iface.ErrStateNotFound. Expired entries are deleted when
// they are read, and by a sweep that a write runs at most once a minute; the
// backend starts no goroutine.
//
// The backend keeps copies of the states and results it is given and hands
// out copies, so callers cannot race with it or with each other. Result
// values stay the Go values the task returned (an int64 stays an int64);
// slices and maps inside them are copied.
//
// # Groups
//
// A group's bookkeeping lists its members in group order (InitGroup) and the
// final state of each member, recorded by SetStateSuccess and
// SetStateFailure of a signature with a GroupUUID. A member that finishes
// before InitGroup, or in a group InitGroup was never called for, creates the
// group, which then expects GroupTaskCount members and lists them in the
// order they finish. A member that finishes twice (it ran again) counts once,
// with its latest state.
//
//   - GroupCompleted compares the number of finished members with
//     groupTaskCount: one map length, whatever the size of the group. A group
//     without bookkeeping is not completed (false, no error).
//   - GroupTaskStates returns the recorded states in group order, with a
//     PENDING state carrying only the UUID for each unfinished member. They
//     do not depend on the members' own states, which may have expired or
//     been purged.
//   - TriggerChord elects the first member that asks and answers true to it,
//     and to it again if it asks again (it may have died before sending the
//     callback), false to every other member.
//
// GroupTaskStates and TriggerChord of a group without bookkeeping (never
// created, purged, or expired) fail with an error wrapping
// iface.ErrGroupNotFound. A group does not expire while a member is
// unfinished, however slow; once every member has finished it expires
// ResultsExpireIn after its last write. PurgeGroupMeta deletes it at once.
//
// Close drops everything; later calls fail with iface.ErrClosed.
package memory
