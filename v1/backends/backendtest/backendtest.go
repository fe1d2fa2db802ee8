// Package backendtest is the conformance suite of result backends: every
// backend of machinist's (a Backend: machinery's methods and the
// context-aware ones) runs Exercise in its tests, so that the
// memory and Redis backends are held to the same semantics.
//
//	func TestConformance(t *testing.T) {
//		backendtest.Exercise(t, func(t *testing.T, cnf *config.Config) backendtest.Backend {
//			b := memory.New(memory.OptionsFrom(cnf))
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// Beyond what backends.ContextBackend documents, the suite fixes these choices:
// GroupCompleted of a group with no bookkeeping is false with no error;
// GroupTaskStates and TriggerChord of such a group fail with
// ErrGroupNotFound; a group created implicitly by its members lists, in
// GroupTaskStates, the finished members in the order they finished;
// PurgeState and PurgeGroupMeta of what does not exist succeed; a closed
// backend fails with ErrClosed. Given a broker on the backend's store
// (WithBroker), it also holds the backend to the states of tasks that wait
// in a queue: PurgeState of such a task makes GetState fail with
// ErrStateNotFound, as machinery's does, and the task still runs.
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Backend is what the suite exercises: a backend with machinery's methods
// and the context-aware ones, as machinist's backends have.
type Backend interface {
	backends.Backend
	backends.ContextBackend
}

// waitLong bounds the waits for something that must happen; they normally
// end much sooner.
const waitLong = 10 * time.Second

// Exercise runs the conformance suite against the backends newBackend makes.
//
// Each subtest calls newBackend once, with its own *testing.T and a config
// that has been through WithDefaults (ResultsExpireIn 1 where the subtest
// tests expiry), and closes the backend when it ends. Subtests run in
// parallel and use task and group UUIDs unique to the run, so the backends
// may share one store (one Redis); newBackend must therefore register its
// own teardown with t.Cleanup rather than defer it in the calling test.
func Exercise(t *testing.T, newBackend func(t *testing.T, cnf *config.Config) Backend, opts ...Option) {
	t.Helper()
	s := &suite{newBackend: newBackend}
	for _, opt := range opts {
		opt(s)
	}
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *suite)
	}{
		{"States", testStates},
		{"SetStatePendingMany", testSetStatePendingMany},
		{"Results", testResults},
		{"StateNotFound", testStateNotFound},
		{"PurgeQueuedTask", testPurgeQueuedTask},
		{"StateExpires", testStateExpires},
		{"GroupCompleted", testGroupCompleted},
		{"CompleteGroupMember", testCompleteGroupMember},
		{"GroupTaskStatesOrder", testGroupTaskStatesOrder},
		{"TriggerChordOnce", testTriggerChordOnce},
		{"ImplicitGroup", testImplicitGroup},
		{"GroupExpiresOnlyWhenComplete", testGroupExpiresOnlyWhenComplete},
		{"PurgeGroupMeta", testPurgeGroupMeta},
		{"Workflow", testWorkflow},
		{"WatchFinished", testWatchFinished},
		{"Close", testClose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, s)
		})
	}
}

type suite struct {
	newBackend func(t *testing.T, cnf *config.Config) Backend
	newBroker  func(t *testing.T, b Backend) brokers.LeaseBroker
}

// Option configures Exercise.
type Option func(*suite)

// WithBroker gives the suite a broker on the store of a backend it made,
// for the checks of the states of tasks that wait in a queue; without it
// they are skipped. The suite closes the broker when the test ends.
func WithBroker(newBroker func(t *testing.T, b Backend) brokers.LeaseBroker) Option {
	return func(s *suite) { s.newBroker = newBroker }
}

// backend returns a fresh backend configured by cnf (after WithDefaults),
// closed when the test ends.
func (s *suite) backend(t *testing.T, cnf config.Config) Backend {
	t.Helper()
	b := s.newBackend(t, cnf.WithDefaults())
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func newSig(name string) *tasks.Signature {
	return &tasks.Signature{UUID: "task_" + uuid.NewString(), Name: name}
}

// newGroup returns n signatures of one fresh group.
func newGroup(n int) (string, []*tasks.Signature) {
	groupUUID := "group_" + uuid.NewString()
	sigs := make([]*tasks.Signature, n)
	for i := range sigs {
		sigs[i] = newSig(fmt.Sprintf("member%d", i))
		sigs[i].GroupUUID, sigs[i].GroupTaskCount = groupUUID, n
	}
	return groupUUID, sigs
}

func uuids(sigs []*tasks.Signature) []string {
	out := make([]string, len(sigs))
	for i, s := range sigs {
		out[i] = s.UUID
	}
	return out
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func getState(t *testing.T, b Backend, taskUUID string) *tasks.TaskState {
	t.Helper()
	st, err := b.GetStateContext(context.Background(), taskUUID)
	if err != nil {
		t.Fatalf("GetState(%s): %v", taskUUID, err)
	}
	return st
}

func wantNotFound(t *testing.T, b Backend, taskUUID, when string) {
	t.Helper()
	st, err := b.GetStateContext(context.Background(), taskUUID)
	if !errors.Is(err, backends.ErrStateNotFound) {
		t.Fatalf("GetState %s: %+v, err %v; want ErrStateNotFound", when, st, err)
	}
}

// describeResults prints results so that a backend storing JSON (numbers
// come back as json.Number or float64, slices as []interface{}) compares
// equal to one storing Go values.
func describeResults(results []*tasks.TaskResult) string {
	out := "["
	for _, r := range results {
		out += fmt.Sprintf("{%s %v}", r.Type, r.Value)
	}
	return out + "]"
}

func testStates(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		state string
		set   func(*tasks.Signature) error
	}{
		{tasks.StatePending, func(sig *tasks.Signature) error { return b.SetStatePendingContext(ctx, sig) }},
		{tasks.StateReceived, func(sig *tasks.Signature) error { return b.SetStateReceivedContext(ctx, sig) }},
		{tasks.StateStarted, func(sig *tasks.Signature) error { return b.SetStateStartedContext(ctx, sig) }},
		{tasks.StateRetry, func(sig *tasks.Signature) error { return b.SetStateRetryContext(ctx, sig) }},
		{tasks.StateSuccess, func(sig *tasks.Signature) error { return b.SetStateSuccessContext(ctx, sig, nil) }},
		{tasks.StateFailure, func(sig *tasks.Signature) error { return b.SetStateFailureContext(ctx, sig, "it broke") }},
	} {
		sig := newSig("task_in_" + tc.state)
		before := time.Now()
		must(t, "SetState "+tc.state, tc.set(sig))
		after := time.Now()
		st := getState(t, b, sig.UUID)
		if st.TaskUUID != sig.UUID || st.TaskName != sig.Name || st.State != tc.state {
			t.Fatalf("state after SetState %s: %+v, want UUID %s name %s", tc.state, st, sig.UUID, sig.Name)
		}
		if st.CreatedAt.Before(before.Add(-time.Second)) || st.CreatedAt.After(after.Add(time.Second)) {
			t.Fatalf("state %s: CreatedAt %s, want the time of the write (%s)", tc.state, st.CreatedAt, before)
		}
		wantErr := ""
		if tc.state == tasks.StateFailure {
			wantErr = "it broke"
		}
		if st.Error != wantErr {
			t.Fatalf("state %s: Error %q, want %q", tc.state, st.Error, wantErr)
		}
	}

	// A later state replaces an earlier one.
	sig := newSig("progress")
	must(t, "SetStatePending", b.SetStatePendingContext(ctx, sig))
	must(t, "SetStateStarted", b.SetStateStartedContext(ctx, sig))
	if st := getState(t, b, sig.UUID); st.State != tasks.StateStarted {
		t.Fatalf("state after PENDING then STARTED: %s", st.State)
	}
	must(t, "SetStateFailure", b.SetStateFailureContext(ctx, sig, "late failure"))
	if st := getState(t, b, sig.UUID); !st.IsFailure() || st.Error != "late failure" {
		t.Fatalf("state after FAILURE: %s %q", st.State, st.Error)
	}

	// A state that is not final never hides a final one: a STARTED or
	// RETRY that lands late (from a worker paused past its lease) is
	// dropped; a final state still replaces a final one, and PENDING (the
	// task sent again) replaces anything.
	done := newSig("done")
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, done, []*tasks.TaskResult{{Type: "int64", Value: 1}}))
	must(t, "late SetStateStarted", b.SetStateStartedContext(ctx, done))
	must(t, "late SetStateRetry", b.SetStateRetryContext(ctx, done))
	must(t, "late SetStateReceived", b.SetStateReceivedContext(ctx, done))
	if st := getState(t, b, done.UUID); !st.IsSuccess() || len(st.Results) != 1 {
		t.Fatalf("state after late STARTED, RETRY and RECEIVED over SUCCESS: %s %v, want SUCCESS with its result", st.State, st.Results)
	}
	must(t, "SetStatePending again", b.SetStatePendingContext(ctx, done))
	if st := getState(t, b, done.UUID); st.State != tasks.StatePending {
		t.Fatalf("state after the task was sent again: %s, want PENDING", st.State)
	}
}

func testSetStatePendingMany(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	sigs := []*tasks.Signature{newSig("a"), newSig("b"), newSig("c")}
	must(t, "SetStatePending", b.SetStatePendingContext(context.Background(), sigs...))
	for _, sig := range sigs {
		if st := getState(t, b, sig.UUID); st.State != tasks.StatePending || st.TaskName != sig.Name {
			t.Fatalf("state of %s: %s %s, want PENDING %s", sig.UUID, st.State, st.TaskName, sig.Name)
		}
	}
}

func testResults(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	sig := newSig("results")
	results := []*tasks.TaskResult{
		{Type: "int64", Value: int64(3)},
		{Type: "string", Value: "three"},
		{Type: "[]string", Value: []string{"a", "b"}},
		{Type: "float64", Value: 1.5},
		{Type: "bool", Value: true},
	}
	want := describeResults(results)
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sig, results))

	// The caller's results are its own after the write.
	results[0].Value = int64(99)
	results[2].Value.([]string)[0] = "changed"
	st := getState(t, b, sig.UUID)
	if !st.IsSuccess() || st.Error != "" {
		t.Fatalf("state: %s %q, want SUCCESS without error", st.State, st.Error)
	}
	if got := describeResults(st.Results); got != want {
		t.Fatalf("results\n got  %s\n want %s", got, want)
	}
	// And the reader's are its own.
	st.Results[1].Value = "changed by reader"
	st.Results = st.Results[:1]
	if got := describeResults(getState(t, b, sig.UUID).Results); got != want {
		t.Fatalf("results after a reader changed its copy\n got  %s\n want %s", got, want)
	}

	// A task that returned only a nil error has empty, non-nil results.
	empty := newSig("no_results")
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, empty, []*tasks.TaskResult{}))
	if st := getState(t, b, empty.UUID); st.Results == nil || len(st.Results) != 0 {
		t.Fatalf("results of a task with no return values = %#v, want empty and non-nil", st.Results)
	}
}

func testStateNotFound(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	wantNotFound(t, b, "task_"+uuid.NewString(), "of a task never seen")

	sig := newSig("purged")
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sig, nil))
	getState(t, b, sig.UUID)
	must(t, "PurgeState", b.PurgeStateContext(ctx, sig.UUID))
	wantNotFound(t, b, sig.UUID, "after PurgeState")
	must(t, "PurgeState of a missing state", b.PurgeStateContext(ctx, sig.UUID))
}

// testPurgeQueuedTask checks that PurgeState of a task that waits in its
// queue makes GetState fail with ErrStateNotFound, as machinery's does,
// whether its PENDING state was written first (as machinery's send writes
// it) or the broker implies it, and for a task scheduled for later; and
// that the task still runs when a worker takes it, the states its worker
// writes reading as usual.
func testPurgeQueuedTask(t *testing.T, s *suite) {
	if s.newBroker == nil {
		t.Skip("no broker on the backend's store (WithBroker)")
	}
	b := s.backend(t, config.Config{})
	br := s.newBroker(t, b)
	t.Cleanup(func() { _ = br.Close() })
	ctx := context.Background()
	queue := "purge_" + uuid.NewString()
	written, implied, scheduled := newSig("written"), newSig("implied"), newSig("scheduled")
	eta := time.Now().Add(time.Hour)
	scheduled.ETA = &eta
	sigs := []*tasks.Signature{written, implied, scheduled}
	for _, sig := range sigs {
		sig.RoutingKey = queue
	}
	must(t, "SetStatePending", b.SetStatePendingContext(ctx, written))
	must(t, "Publish", br.PublishTasks(ctx, sigs...))
	if st := getState(t, b, written.UUID); st.State != tasks.StatePending {
		t.Fatalf("state of a queued task before PurgeState: %+v, want PENDING", st)
	}
	for _, sig := range sigs {
		must(t, "PurgeState", b.PurgeStateContext(ctx, sig.UUID))
		wantNotFound(t, b, sig.UUID, "of a queued task ("+sig.Name+") after PurgeState")
		if r, ok := b.(backends.QueueStateReader); ok {
			if st, err := r.GetStateInContext(ctx, queue, sig.UUID); !errors.Is(err, backends.ErrStateNotFound) {
				t.Fatalf("GetStateIn of a queued task (%s) after PurgeState: %+v, err %v; want ErrStateNotFound", sig.Name, st, err)
			}
		}
	}

	// The tasks due now still run; what their worker writes reads as usual.
	fetchCtx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	var taken []*brokers.Delivery
	for len(taken) < 2 {
		ds, err := br.Fetch(fetchCtx, []string{queue}, 2-len(taken), nil)
		must(t, "Fetch of the purged tasks", err)
		taken = append(taken, ds...)
	}
	for _, d := range taken {
		if d.Signature.UUID != written.UUID && d.Signature.UUID != implied.UUID {
			t.Fatalf("Fetch took %s, want the purged tasks due now", d.Signature.Name)
		}
		must(t, "SetStateStarted", b.SetStateStartedContext(ctx, d.Signature))
		if st := getState(t, b, d.Signature.UUID); st.State != tasks.StateStarted {
			t.Fatalf("state of a purged task (%s) its worker started: %+v, want STARTED", d.Signature.Name, st)
		}
		must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, d.Signature, nil))
		must(t, "Ack", br.Ack(ctx, d))
		if st := getState(t, b, d.Signature.UUID); st.State != tasks.StateSuccess {
			t.Fatalf("state of a purged task (%s) that succeeded: %+v, want SUCCESS", d.Signature.Name, st)
		}
	}
}

func testStateExpires(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{ResultsExpireIn: 1})
	sig := newSig("short_lived")
	must(t, "SetStateSuccess", b.SetStateSuccessContext(context.Background(), sig, nil))
	written := time.Now()
	getState(t, b, sig.UUID)

	deadline := written.Add(waitLong)
	for {
		_, err := b.GetStateContext(context.Background(), sig.UUID)
		if errors.Is(err, backends.ErrStateNotFound) {
			break
		}
		must(t, "GetState", err)
		if time.Now().After(deadline) {
			t.Fatalf("state still there %s after its write with ResultsExpireIn 1", waitLong)
		}
		<-time.After(20 * time.Millisecond)
	}
	if since := time.Since(written); since < 900*time.Millisecond {
		t.Fatalf("state gone %s after its write, before ResultsExpireIn (1s)", since)
	}
}

// testCompleteGroupMember checks that the member whose success completes
// its group is told so by the write itself, that the others are not, that
// a member finishing again after completion is told true again, and that
// the state and the group bookkeeping are those SetStateSuccess writes.
func testCompleteGroupMember(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	groupUUID, sigs := newGroup(3)
	must(t, "InitGroup", b.InitGroupContext(ctx, groupUUID, uuids(sigs)))
	complete := func(sig *tasks.Signature, v int64) bool {
		t.Helper()
		state := tasks.NewSuccessTaskState(sig, []*tasks.TaskResult{{Type: "int64", Value: v}})
		state.Trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		done, err := b.CompleteGroupMember(ctx, sig, state)
		must(t, "CompleteGroupMember", err)
		return done
	}
	if complete(sigs[2], 3) || complete(sigs[0], 1) {
		t.Fatal("CompleteGroupMember reported the group complete with a member unfinished")
	}
	if !complete(sigs[1], 2) {
		t.Fatal("CompleteGroupMember of the last member did not report the group complete")
	}
	if !complete(sigs[0], 1) {
		t.Fatal("a member finishing again after completion was not told the group is complete")
	}
	st, err := b.GetStateContext(ctx, sigs[1].UUID)
	must(t, "GetState", err)
	if st.State != tasks.StateSuccess || len(st.Results) != 1 {
		t.Fatalf("state after CompleteGroupMember: %s with %d results; want SUCCESS with 1", st.State, len(st.Results))
	}
	// The group keeps each member's state as written, its Trace too (the
	// chord's callback links to the members' spans).
	states, err := b.GroupTaskStatesContext(ctx, groupUUID, 3)
	must(t, "GroupTaskStates", err)
	for i, st := range states {
		if st.TaskUUID != sigs[i].UUID || !st.IsSuccess() || st.Trace != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
			t.Fatalf("group state %d: %s %s trace %q; want %s SUCCESS with the trace written", i, st.TaskUUID, st.State, st.Trace, sigs[i].UUID)
		}
	}
}

func testGroupCompleted(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	groupUUID, sigs := newGroup(3)

	completed := func() bool {
		t.Helper()
		done, err := b.GroupCompletedContext(ctx, groupUUID, len(sigs))
		must(t, "GroupCompleted", err)
		return done
	}
	if done, err := b.GroupCompletedContext(ctx, groupUUID, len(sigs)); done || err != nil {
		t.Fatalf("GroupCompleted of an unknown group: %t, %v; want false, nil", done, err)
	}
	must(t, "InitGroup", b.InitGroupContext(ctx, groupUUID, uuids(sigs)))
	if completed() {
		t.Fatal("GroupCompleted true before any member finished")
	}
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[0], nil))
	must(t, "SetStateStarted", b.SetStateStartedContext(ctx, sigs[2])) // not final
	must(t, "SetStateFailure", b.SetStateFailureContext(ctx, sigs[1], "failed for good"))
	if completed() {
		t.Fatal("GroupCompleted true with one member unfinished")
	}
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[2], nil))
	if !completed() {
		t.Fatal("GroupCompleted false after every member finished (one of them failed)")
	}
	// A member finishing twice (it ran again) is counted once.
	again, more := newGroup(2)
	must(t, "InitGroup", b.InitGroupContext(ctx, again, uuids(more)))
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, more[0], nil))
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, more[0], nil))
	if done, err := b.GroupCompletedContext(ctx, again, 2); done || err != nil {
		t.Fatalf("GroupCompleted after one member finished twice: %t, %v; want false", done, err)
	}
}

func testGroupTaskStatesOrder(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	groupUUID, sigs := newGroup(3)
	must(t, "InitGroup", b.InitGroupContext(ctx, groupUUID, uuids(sigs)))

	states := func() []*tasks.TaskState {
		t.Helper()
		sts, err := b.GroupTaskStatesContext(ctx, groupUUID, len(sigs))
		must(t, "GroupTaskStates", err)
		if len(sts) != len(sigs) {
			t.Fatalf("GroupTaskStates returned %d states, want %d", len(sts), len(sigs))
		}
		for i, st := range sts {
			if st.TaskUUID != sigs[i].UUID {
				t.Fatalf("GroupTaskStates[%d] is %s, want %s (group order)", i, st.TaskUUID, sigs[i].UUID)
			}
		}
		return sts
	}
	for i, st := range states() {
		if st.State != tasks.StatePending {
			t.Fatalf("member %d before it finished: %s, want PENDING", i, st.State)
		}
	}

	// Finish in reverse order; the states come back in group order.
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[2], []*tasks.TaskResult{{Type: "string", Value: "r2"}}))
	if sts := states(); sts[0].State != tasks.StatePending || sts[1].State != tasks.StatePending || !sts[2].IsSuccess() {
		t.Fatalf("after the last member finished: %s %s %s, want PENDING PENDING SUCCESS", sts[0].State, sts[1].State, sts[2].State)
	}
	must(t, "SetStateFailure", b.SetStateFailureContext(ctx, sigs[1], "r1 failed"))
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[0], []*tasks.TaskResult{{Type: "string", Value: "r0"}}))

	sts := states()
	if !sts[0].IsSuccess() || describeResults(sts[0].Results) != "[{string r0}]" {
		t.Fatalf("member 0: %s %s, want SUCCESS [{string r0}]", sts[0].State, describeResults(sts[0].Results))
	}
	if !sts[1].IsFailure() || sts[1].Error != "r1 failed" {
		t.Fatalf("member 1: %s %q, want FAILURE r1 failed", sts[1].State, sts[1].Error)
	}
	if !sts[2].IsSuccess() || describeResults(sts[2].Results) != "[{string r2}]" {
		t.Fatalf("member 2: %s %s, want SUCCESS [{string r2}]", sts[2].State, describeResults(sts[2].Results))
	}

	// The recorded states do not depend on the members' own states.
	for _, sig := range sigs {
		must(t, "PurgeState", b.PurgeStateContext(ctx, sig.UUID))
	}
	if sts := states(); !sts[0].IsSuccess() || !sts[1].IsFailure() || !sts[2].IsSuccess() {
		t.Fatal("GroupTaskStates changed when the members' states were purged")
	}

	if _, err := b.GroupTaskStatesContext(ctx, "group_"+uuid.NewString(), 3); !errors.Is(err, backends.ErrGroupNotFound) {
		t.Fatalf("GroupTaskStates of an unknown group: err = %v, want ErrGroupNotFound", err)
	}
}

func testTriggerChordOnce(t *testing.T, s *suite) {
	const members = 50
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	groupUUID, sigs := newGroup(members)
	must(t, "InitGroup", b.InitGroupContext(ctx, groupUUID, uuids(sigs)))

	var (
		mu      sync.Mutex
		winners []string
		errs    []error
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for _, sig := range sigs {
		wg.Go(func() {
			<-start
			won, err := b.TriggerChordContext(ctx, groupUUID, sig.UUID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if won {
				winners = append(winners, sig.UUID)
			}
		})
	}
	close(start)
	wg.Wait()
	if errs != nil {
		t.Fatalf("TriggerChord: %v", errors.Join(errs...))
	}
	if len(winners) != 1 {
		t.Fatalf("%d of %d concurrent members won TriggerChord, want exactly 1", len(winners), members)
	}
	won, err := b.TriggerChordContext(ctx, groupUUID, winners[0])
	if err != nil || !won {
		t.Fatalf("TriggerChord again by the winner: %t, %v; want true", won, err)
	}
	for _, sig := range sigs {
		if sig.UUID == winners[0] {
			continue
		}
		if won, err := b.TriggerChordContext(ctx, groupUUID, sig.UUID); err != nil || won {
			t.Fatalf("TriggerChord again by a loser: %t, %v; want false", won, err)
		}
		break
	}
	if _, err := b.TriggerChordContext(ctx, "group_"+uuid.NewString(), sigs[0].UUID); !errors.Is(err, backends.ErrGroupNotFound) {
		t.Fatalf("TriggerChord of an unknown group: err = %v, want ErrGroupNotFound", err)
	}
}

func testImplicitGroup(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	groupUUID, sigs := newGroup(2) // no InitGroup: GroupTaskCount says how many

	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[1], []*tasks.TaskResult{{Type: "int64", Value: int64(1)}}))
	if done, err := b.GroupCompletedContext(ctx, groupUUID, 2); done || err != nil {
		t.Fatalf("GroupCompleted with one of two finished: %t, %v; want false", done, err)
	}
	sts, err := b.GroupTaskStatesContext(ctx, groupUUID, 2)
	must(t, "GroupTaskStates", err)
	if len(sts) != 1 || sts[0].TaskUUID != sigs[1].UUID || !sts[0].IsSuccess() {
		t.Fatalf("GroupTaskStates of an implicit group with one finished member: %+v, want [%s SUCCESS]", sts, sigs[1].UUID)
	}

	must(t, "SetStateFailure", b.SetStateFailureContext(ctx, sigs[0], "no"))
	if done, err := b.GroupCompletedContext(ctx, groupUUID, 2); !done || err != nil {
		t.Fatalf("GroupCompleted with both finished: %t, %v; want true", done, err)
	}
	sts, err = b.GroupTaskStatesContext(ctx, groupUUID, 2)
	must(t, "GroupTaskStates", err)
	if len(sts) != 2 || sts[0].TaskUUID != sigs[1].UUID || sts[1].TaskUUID != sigs[0].UUID || !sts[1].IsFailure() {
		t.Fatalf("GroupTaskStates of an implicit group: %+v, want both members in the order they finished", sts)
	}
	if won, err := b.TriggerChordContext(ctx, groupUUID, sigs[0].UUID); !won || err != nil {
		t.Fatalf("TriggerChord of an implicit group: %t, %v; want true", won, err)
	}
}

func testGroupExpiresOnlyWhenComplete(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{ResultsExpireIn: 1})
	ctx := context.Background()
	groupUUID, sigs := newGroup(2)
	must(t, "InitGroup", b.InitGroupContext(ctx, groupUUID, uuids(sigs)))
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[0], nil))

	// A slow group outlives ResultsExpireIn while a member is unfinished:
	// wait for time to pass well beyond it.
	<-time.After(1500 * time.Millisecond)
	sts, err := b.GroupTaskStatesContext(ctx, groupUUID, 2)
	if err != nil || len(sts) != 2 || !sts[0].IsSuccess() {
		t.Fatalf("unfinished group after ResultsExpireIn: %v, %v; want its bookkeeping kept", sts, err)
	}

	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[1], nil))
	finished := time.Now()
	if done, err := b.GroupCompletedContext(ctx, groupUUID, 2); !done || err != nil {
		t.Fatalf("GroupCompleted: %t, %v; want true", done, err)
	}
	deadline := finished.Add(waitLong)
	for {
		_, err := b.GroupTaskStatesContext(ctx, groupUUID, 2)
		if errors.Is(err, backends.ErrGroupNotFound) {
			break
		}
		must(t, "GroupTaskStates", err)
		if time.Now().After(deadline) {
			t.Fatalf("completed group still there %s after its last write with ResultsExpireIn 1", waitLong)
		}
		<-time.After(20 * time.Millisecond)
	}
	if since := time.Since(finished); since < 900*time.Millisecond {
		t.Fatalf("completed group gone %s after its last write, before ResultsExpireIn (1s)", since)
	}
}

func testPurgeGroupMeta(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	groupUUID, sigs := newGroup(1)
	must(t, "InitGroup", b.InitGroupContext(ctx, groupUUID, uuids(sigs)))
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sigs[0], nil))
	if done, err := b.GroupCompletedContext(ctx, groupUUID, 1); !done || err != nil {
		t.Fatalf("GroupCompleted: %t, %v; want true", done, err)
	}

	must(t, "PurgeGroupMeta", b.PurgeGroupMetaContext(ctx, groupUUID))
	if done, err := b.GroupCompletedContext(ctx, groupUUID, 1); done || err != nil {
		t.Fatalf("GroupCompleted after PurgeGroupMeta: %t, %v; want false, nil", done, err)
	}
	if _, err := b.GroupTaskStatesContext(ctx, groupUUID, 1); !errors.Is(err, backends.ErrGroupNotFound) {
		t.Fatalf("GroupTaskStates after PurgeGroupMeta: err = %v, want ErrGroupNotFound", err)
	}
	if _, err := b.TriggerChordContext(ctx, groupUUID, sigs[0].UUID); !errors.Is(err, backends.ErrGroupNotFound) {
		t.Fatalf("TriggerChord after PurgeGroupMeta: err = %v, want ErrGroupNotFound", err)
	}
	getState(t, b, sigs[0].UUID) // the member's own state stays
	must(t, "PurgeGroupMeta of a missing group", b.PurgeGroupMetaContext(ctx, groupUUID))
}

func testClose(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	ctx := context.Background()
	sig := newSig("before_close")
	must(t, "SetStatePending", b.SetStatePendingContext(ctx, sig))
	must(t, "Close", b.Close())
	must(t, "second Close", b.Close())
	if _, err := b.GetStateContext(ctx, sig.UUID); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("GetState after Close: err = %v, want ErrClosed", err)
	}
	if err := b.SetStateStartedContext(ctx, sig); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("SetStateStarted after Close: err = %v, want ErrClosed", err)
	}
}

// testWorkflow: a backend that records workflows (backends.Workflows) finds
// one from its own UUID and from any of its tasks' whose PENDING state
// names it, written by InitWorkflowContext, by SetStatePendingContext or
// kept through later writes; an unknown UUID, or a task of no workflow,
// is ErrWorkflowNotFound.
func testWorkflow(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	w, ok := b.(backends.Workflows)
	if !ok {
		t.Skipf("%T does not record workflows", b)
	}
	ctx := context.Background()
	first, second := newSig("first"), newSig("second")
	first.RoutingKey, second.RoutingKey = "q1", "q2"
	first.OnSuccess = []*tasks.Signature{second}
	eta := time.Now().Add(time.Hour).Round(time.Millisecond)
	second.ETA = &eta
	id := "chain_" + uuid.NewString()
	wf := tasks.NewWorkflowMeta(id, tasks.WorkflowChain, first, second)
	if first.WorkflowUUID != id || second.WorkflowUUID != id {
		t.Fatalf("NewWorkflowMeta did not mark the chain's tasks: %q, %q", first.WorkflowUUID, second.WorkflowUUID)
	}
	must(t, "InitWorkflow", w.InitWorkflowContext(ctx, wf, first, second))
	for _, sig := range []*tasks.Signature{first, second} {
		if st := getState(t, b, sig.UUID); st.State != tasks.StatePending || st.Workflow != id {
			t.Fatalf("state of %s after InitWorkflow: %+v, want PENDING in workflow %s", sig.Name, st, id)
		}
	}
	// WorkflowUUID travels with the task, so its worker's writes name the
	// workflow; a write from a signature without it (an older sender's)
	// keeps the workflow the state names.
	decoded, err := tasks.DecodeSignature(mustEncode(t, first))
	if err != nil || decoded.WorkflowUUID != id {
		t.Fatalf("a signature that travelled: %+v, %v; want WorkflowUUID %s", decoded, err, id)
	}
	must(t, "SetStateStarted", b.SetStateStartedContext(ctx, decoded))
	decoded.WorkflowUUID = ""
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, decoded, nil))
	if st := getState(t, b, first.UUID); st.State != tasks.StateSuccess || st.Workflow != id {
		t.Fatalf("state of first after its worker's writes: %+v, want SUCCESS in workflow %s", st, id)
	}
	for _, key := range []string{id, first.UUID, second.UUID} {
		got, err := w.GetWorkflowContext(ctx, key)
		if err != nil {
			t.Fatalf("GetWorkflow(%s): %v", key, err)
		}
		if got.WorkflowUUID != id || got.Kind != tasks.WorkflowChain || !got.LastETA.Equal(eta) || len(got.Tasks) != 2 ||
			!reflect.DeepEqual(got.Tasks[0], tasks.WorkflowTask{UUID: first.UUID, Name: "first", Queue: "q1"}) ||
			!reflect.DeepEqual(got.Tasks[1], tasks.WorkflowTask{UUID: second.UUID, Name: "second", Queue: "q2", Follows: first.UUID}) {
			t.Fatalf("GetWorkflow(%s) = %+v, want the chain %s of first then second", key, got, id)
		}
	}

	// A group of one queue: its members (listed by the group's
	// bookkeeping, not the record), whose PENDING states, written with
	// SetStatePending, name it.
	groupUUID, members := newGroup(2)
	for _, m := range members {
		m.RoutingKey = "q3"
	}
	gwf := tasks.NewWorkflowMeta(groupUUID, tasks.WorkflowGroup, members...)
	must(t, "InitWorkflow", w.InitWorkflowContext(ctx, gwf))
	must(t, "SetStatePending", b.SetStatePendingContext(ctx, members...))
	got, err := w.GetWorkflowContext(ctx, members[1].UUID)
	if err != nil || got.WorkflowUUID != groupUUID || got.Kind != tasks.WorkflowGroup || got.Members != 2 || got.Queue != "q3" || len(got.Tasks) != 0 {
		t.Fatalf("GetWorkflow of a group member = %+v, %v; want group %s of 2 members in q3", got, err, groupUUID)
	}
	// Of several queues: its members are listed.
	mixedUUID, mixed := newGroup(2)
	mixed[0].RoutingKey, mixed[1].RoutingKey = "q4", "q5"
	must(t, "InitWorkflow", w.InitWorkflowContext(ctx, tasks.NewWorkflowMeta(mixedUUID, tasks.WorkflowGroup, mixed...)))
	got, err = w.GetWorkflowContext(ctx, mixedUUID)
	if err != nil || got.Members != 0 || len(got.Tasks) != 2 || got.Tasks[1].Queue != "q5" || got.Tasks[1].GroupUUID != mixedUUID || got.Tasks[1].GroupTaskCount != 2 {
		t.Fatalf("GetWorkflow of a group of two queues = %+v, %v; want its two members listed", got, err)
	}

	plain := newSig("plain")
	must(t, "SetStatePending", b.SetStatePendingContext(ctx, plain))
	for _, key := range []string{"workflow_unknown", plain.UUID} {
		if _, err := w.GetWorkflowContext(ctx, key); !errors.Is(err, backends.ErrWorkflowNotFound) {
			t.Fatalf("GetWorkflow(%s): %v, want ErrWorkflowNotFound", key, err)
		}
	}
}

func mustEncode(t *testing.T, sig *tasks.Signature) []byte {
	t.Helper()
	raw, err := tasks.EncodeSignature(sig)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// testWatchFinished holds an backends.Notifier to its notices: every watch of
// a task hears of its final states, and a stopped watch hears nothing
// more. (A notice may also come when nothing final was written: it only
// says "read the state now".) A backend that cannot watch (nil channel:
// Redis Cluster) skips it.
func testWatchFinished(t *testing.T, s *suite) {
	b := s.backend(t, config.Config{})
	n, ok := b.(backends.Notifier)
	if !ok {
		t.Skip("the backend is not a backends.Notifier")
	}
	ctx := context.Background()
	sig := newSig("add")
	first, stopFirst := n.WatchFinished(ctx, sig.UUID)
	defer stopFirst()
	if first == nil {
		t.Skip("the backend cannot watch here")
	}
	second, stopSecond := n.WatchFinished(ctx, sig.UUID)
	defer stopSecond()

	must(t, "SetStatePending", b.SetStatePendingContext(ctx, sig))
	must(t, "SetStateStarted", b.SetStateStartedContext(ctx, sig))
	must(t, "SetStateSuccess", b.SetStateSuccessContext(ctx, sig, nil))
	notice(t, first, "the first watch, of SUCCESS")
	notice(t, second, "the second watch, of SUCCESS")

	stopSecond()
	drain(first)
	drain(second)
	must(t, "SetStateFailure", b.SetStateFailureContext(ctx, sig, "again"))
	notice(t, first, "the first watch, of FAILURE")
	noNotice(t, second, "a stopped watch")
}

// drain takes the notice waiting on notices, if there is one.
func drain(notices <-chan struct{}) {
	select {
	case <-notices:
	default:
	}
}

// notice waits for a notice on notices, failing the test after waitLong.
func notice(t *testing.T, notices <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(waitLong)
	defer timer.Stop()
	select {
	case <-notices:
	case <-timer.C:
		t.Fatalf("no notice to %s within %s", what, waitLong)
	}
}

// noNotice checks that no notice comes on notices for a moment.
func noNotice(t *testing.T, notices <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(100 * time.Millisecond)
	defer timer.Stop()
	select {
	case <-notices:
		t.Fatalf("a notice came for %s", what)
	case <-timer.C:
	}
}
