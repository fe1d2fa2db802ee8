package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/b6192125/machinist/internal/store"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// PairedBroker is what ExercisePaired exercises.
type PairedBroker interface {
	Broker
	store.StateBroker
	store.Joiner
}

// ExercisePaired runs the conformance suite of brokers paired with their
// result backend (store.StateBroker): the memory pair, and the Redis broker
// and backend on one server. newPair returns a broker and the backend it is
// paired with, configured by cnf (through WithDefaults), closed by newPair's
// own t.Cleanup.
//
// What it fixes: every write a worker makes under a task's lease (its
// SUCCESS with the acknowledgement, a committed SUCCESS or FAILURE, a
// group member's record in its group, RETRY, STARTED) is refused whole once
// the lease is gone, and made whole while it is held.
func ExercisePaired(t *testing.T, newPair func(t *testing.T, cnf *config.Config) (PairedBroker, backends.ContextBackend)) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(*testing.T, func(*testing.T, *config.Config) (PairedBroker, backends.ContextBackend))
	}{
		{"StaleHolderWritesNothing", testStaleHolderWritesNothing},
		{"AckSuccessSendsNext", testAckSuccessSendsNext},
		{"AckSuccessSendsLimited", testAckSuccessSendsLimited},
		{"AckSuccessKeepsOut", testAckSuccessKeepsOut},
		{"AckSuccessTakes", testAckSuccessTakes},
		{"AckSuccessChordDue", testAckSuccessChordDue},
		{"UniqueFreedByFinalState", testUniqueFreedByFinalState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newPair)
		})
	}
}

// noTake is the error of a settle (AckSuccess, AckTake) that took nothing,
// or was asked to take nothing.
func noTake(taken *brokers.Delivery, err error) error {
	if err == nil && taken != nil {
		return fmt.Errorf("took task %s, want none", taken.Signature.UUID)
	}
	return err
}

// testAckSuccessSendsNext: AckSuccess publishes the tasks that follow with
// their PENDING states, in their own queues, due at their ETAs; one that
// is still queued counts as sent; after a recovery, one whose state shows
// it started is not sent again; a group member is recorded in its group.
func testAckSuccessSendsNext(t *testing.T, newPair func(t *testing.T, cnf *config.Config) (PairedBroker, backends.ContextBackend)) {
	b, be := pair(t, newPair)
	ctx := context.Background()
	q, nextQ, laterQ := queueName(t, "q"), queueName(t, "next"), queueName(t, "later")
	results := []*tasks.TaskResult{{Type: "int64", Value: 7}}

	// A plain task: two next tasks, one due now and one in an hour, and a
	// third already queued (sent by an earlier run).
	sig := newSig(q, "add")
	now, later, queued := newSig(nextQ, "double"), newSig(laterQ, "report"), newSig(nextQ, "queued")
	eta := time.Now().Add(time.Hour)
	later.ETA = &eta
	must(t, "PublishPending", b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig, queued}}))
	d := fetchOne(t, b, q)
	must(t, "AckSuccess", noTake(ackSuccess(ctx, b, d, results, []*tasks.Signature{now, later, queued}, nil)))
	wantState(t, be, sig.UUID, tasks.StateSuccess)
	wantState(t, be, now.UUID, tasks.StatePending)
	wantState(t, be, later.UUID, tasks.StatePending)
	wantSizes(t, b, q, brokers.QueueInfo{})
	wantSizes(t, b, nextQ, brokers.QueueInfo{Pending: 2})
	wantSizes(t, b, laterQ, brokers.QueueInfo{Scheduled: 1})
	got := fetch(t, b, []string{nextQ}, 2)
	wantOrder(t, "next queue", deliveryUUIDs(got), []string{queued.UUID, now.UUID})
	sameSignature(t, "next task", got[1].Signature, now)
	ack(t, b, got...)

	// After a recovery, a next task that has started is not sent again;
	// one that has not is.
	sig = newSig(q, "add")
	started, fresh := newSig(nextQ, "started"), newSig(nextQ, "fresh")
	must(t, "PublishPending", b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig}}))
	must(t, "SetStateStarted", be.SetStateStartedContext(ctx, started))
	stale := fetchOne(t, b, q)
	endLease(t, b, stale)
	eventually(t, "task recovered", func() bool { return queueInfo(t, b, q).Pending == 1 })
	d = fetchOne(t, b, q)
	if d.Recovered != 1 {
		t.Fatalf("Recovered = %d after one recovery, want 1", d.Recovered)
	}
	must(t, "AckSuccess after a recovery", noTake(ackSuccess(ctx, b, d, results, []*tasks.Signature{started, fresh}, nil)))
	wantState(t, be, started.UUID, tasks.StateStarted)
	wantState(t, be, fresh.UUID, tasks.StatePending)
	wantOrder(t, "next queue after a recovery", deliveryUUIDs(fetch(t, b, []string{nextQ}, 2)), []string{fresh.UUID})

	// A group member without a chord callback is recorded in its group.
	groupUUID := "group_" + uuid.NewString()
	member := newSig(q, "part")
	member.GroupUUID, member.GroupTaskCount = groupUUID, 1
	must(t, "InitGroup", be.InitGroupContext(ctx, groupUUID, []string{member.UUID}))
	must(t, "PublishPending", b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{member}}))
	must(t, "member's AckSuccess", noTake(ackSuccess(ctx, b, fetchOne(t, b, q), results, nil, nil)))
	if done, err := be.GroupCompletedContext(ctx, groupUUID, 1); err != nil || !done {
		t.Fatalf("GroupCompleted after its member's AckSuccess: %t, %v; want true", done, err)
	}
}

func testStaleHolderWritesNothing(t *testing.T, newPair func(t *testing.T, cnf *config.Config) (PairedBroker, backends.ContextBackend)) {
	b, be := pair(t, newPair)
	if b.Join(be) == nil {
		t.Fatal("Join(its own backend) = nil")
	}
	ctx := context.Background()
	q := queueName(t, "q")
	plain := newSig(q, "add")
	groupUUID := "group_" + uuid.NewString()
	member, other := newSig(q, "part"), newSig(q, "part")
	for _, m := range []*tasks.Signature{member, other} {
		m.GroupUUID, m.GroupTaskCount = groupUUID, 2
		m.ChordCallback = &tasks.Signature{UUID: "chord_" + uuid.NewString(), Name: "sum", RoutingKey: q}
	}
	must(t, "InitGroup", be.InitGroupContext(ctx, groupUUID, []string{member.UUID, other.UUID}))
	must(t, "PublishPending", b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{plain, member}}))
	wantState(t, be, plain.UUID, tasks.StatePending)

	stale := fetch(t, b, []string{q}, 2)
	for _, d := range stale {
		endLease(t, b, d)
	}
	eventually(t, "both tasks recovered", func() bool { return queueInfo(t, b, q).Pending == 2 })
	fresh := fetch(t, b, []string{q}, 2)
	byUUID := func(ds []*brokers.Delivery, id string) *brokers.Delivery {
		for _, d := range ds {
			if d.Signature.UUID == id {
				return d
			}
		}
		t.Fatalf("no delivery of task %s", id)
		return nil
	}
	stalePlain, staleMember := byUUID(stale, plain.UUID), byUUID(stale, member.UUID)

	results := []*tasks.TaskResult{{Type: "int64", Value: 7}}
	nextQ := queueName(t, "next")
	next := newSig(nextQ, "double")
	wantLeaseLost(t, "stale AckSuccess", noTake(ackSuccess(ctx, b, stalePlain, results, []*tasks.Signature{next}, nil)), stalePlain)
	wantSizes(t, b, nextQ, brokers.QueueInfo{})
	if st, err := be.GetStateContext(ctx, next.UUID); err == nil {
		t.Fatalf("the stale AckSuccess wrote the next task's state %s", st.State)
	}
	for _, w := range []struct {
		what   string
		state  *tasks.TaskState
		commit bool
	}{
		{"committed SUCCESS", tasks.NewSuccessTaskState(plain, results), true},
		{"committed FAILURE", tasks.NewFailureTaskState(plain, "boom"), true},
		{"RETRY", tasks.NewRetryTaskState(plain), false},
		{"STARTED", tasks.NewStartedTaskState(plain), false},
	} {
		_, err := b.WriteState(ctx, stalePlain, w.state, w.commit)
		wantLeaseLost(t, "stale holder's "+w.what, err, stalePlain)
	}
	_, err := b.WriteState(ctx, staleMember, tasks.NewSuccessTaskState(member, results), true)
	wantLeaseLost(t, "stale chord member's SUCCESS", err, staleMember)
	_, err = b.WriteState(ctx, staleMember, tasks.NewFailureTaskState(member, "boom"), true)
	wantLeaseLost(t, "stale chord member's FAILURE", err, staleMember)

	wantState(t, be, plain.UUID, tasks.StatePending)
	wantState(t, be, member.UUID, tasks.StatePending)
	if done, err := be.GroupCompletedContext(ctx, groupUUID, 1); err != nil || done {
		t.Fatalf("GroupCompleted(1 member) after the stale writes: %t, %v; want false (nothing recorded)", done, err)
	}
	for _, d := range fresh {
		if d.Outcome != nil {
			t.Fatalf("delivery of %s after the stale writes carries Outcome %+v, want none", d.Signature.UUID, d.Outcome)
		}
	}

	// The holders' writes land whole.
	freshPlain, freshMember := byUUID(fresh, plain.UUID), byUUID(fresh, member.UUID)
	groupDone, err := b.WriteState(ctx, freshMember, tasks.NewSuccessTaskState(member, results), true)
	if err != nil || groupDone {
		t.Fatalf("holder's chord member SUCCESS: groupDone %t, %v; want false (1 of 2), nil", groupDone, err)
	}
	wantState(t, be, member.UUID, tasks.StateSuccess)
	states, err := be.GroupTaskStatesContext(ctx, groupUUID, 2)
	if err != nil || len(states) != 2 || states[0].State != tasks.StateSuccess || states[1].State != tasks.StatePending {
		t.Fatalf("GroupTaskStates after the holder's write: %v, %v; want [SUCCESS PENDING]", describeStates(states), err)
	}
	must(t, "holder's AckSuccess", noTake(ackSuccess(ctx, b, freshPlain, results, nil, nil)))
	st := wantState(t, be, plain.UUID, tasks.StateSuccess)
	if len(st.Results) != 1 || fmt.Sprint(st.Results[0].Value) != "7" {
		t.Fatalf("holder's result: %+v, want int64 7", st.Results)
	}
	ack(t, b, freshMember)
	wantSizes(t, b, q, brokers.QueueInfo{})
}

// pair returns a pair with the suite's lease (leaseDuration) whose
// recoverer runs every 50 ms.
func pair(t *testing.T, newPair func(t *testing.T, cnf *config.Config) (PairedBroker, backends.ContextBackend)) (PairedBroker, backends.ContextBackend) {
	return newPair(t, (&config.Config{
		DefaultQueue:    queueName(t, "default"),
		LeaseDuration:   leaseDuration,
		RecoverInterval: 50 * time.Millisecond,
	}).WithDefaults())
}

// wantState checks the state of task id and returns it.
func wantState(t *testing.T, be backends.ContextBackend, id, want string) *tasks.TaskState {
	t.Helper()
	st, err := be.GetStateContext(context.Background(), id)
	if err != nil {
		t.Fatalf("GetState(%s): %v", id, err)
	}
	if st.State != want {
		t.Fatalf("state of %s = %s, want %s", id, st.State, want)
	}
	return st
}

func describeStates(states []*tasks.TaskState) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = st.State
	}
	return out
}

// testAckSuccessKeepsOut: a next task kept out by its workflow's
// cancellation (CancelTask with a bar) is not sent by AckSuccess, nor is
// its PENDING state written over its FAILURE; the others are.
func testAckSuccessKeepsOut(t *testing.T, newPair func(t *testing.T, cnf *config.Config) (PairedBroker, backends.ContextBackend)) {
	b, be := pair(t, newPair)
	ctx := context.Background()
	q, nextQ := queueName(t, "q"), queueName(t, "next")
	sig := newSig(q, "add")
	out, in := newSig(nextQ, "out"), newSig(nextQ, "in")
	must(t, "PublishPending", b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig}}))
	if _, _, err := b.CancelTask(ctx, nextQ, out.UUID, "cancelled by a test", time.Minute); err != nil {
		t.Fatalf("CancelTask with a bar: %v", err)
	}
	must(t, "SetStateFailure", be.SetStateFailureContext(ctx, out, "cancelled by a test"))
	d := fetchOne(t, b, q)
	must(t, "AckSuccess", noTake(ackSuccess(ctx, b, d, nil, []*tasks.Signature{out, in}, nil)))
	wantState(t, be, sig.UUID, tasks.StateSuccess)
	wantState(t, be, out.UUID, tasks.StateFailure)
	wantState(t, be, in.UUID, tasks.StatePending)
	got := fetch(t, b, []string{nextQ}, 2)
	wantOrder(t, "next queue", deliveryUUIDs(got), []string{in.UUID})
	ack(t, b, got...)
}

// testAckSuccessSendsLimited: the tasks AckSuccess sends keep their limit:
// of two next tasks limited to one at a time, one is handed out.
func testAckSuccessSendsLimited(t *testing.T, newPair func(t *testing.T, cnf *config.Config) (PairedBroker, backends.ContextBackend)) {
	b, _ := pair(t, newPair)
	ctx := context.Background()
	q, nextQ := queueName(t, "q"), queueName(t, "next")
	sig := newSig(q, "add")
	l := tasks.Limit{Key: "k", Concurrency: 1}
	n1, n2 := limited(nextQ, "n", l), limited(nextQ, "n", l)
	must(t, "PublishPending", b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig}}))
	must(t, "AckSuccess", noTake(ackSuccess(ctx, b, fetchOne(t, b, q), nil, []*tasks.Signature{n1, n2}, nil)))
	got := fetch(t, b, []string{nextQ}, 2)
	wantOrder(t, "next queue", deliveryUUIDs(got), []string{n1.UUID})
	wantSizes(t, b, nextQ, brokers.QueueInfo{Active: 1, Limited: 1})
	ack(t, b, got...)
	ack(t, b, fetchOne(t, b, nextQ))
}

// ackSuccess is b.AckSuccess of d with the SUCCESS state of results.
func ackSuccess(ctx context.Context, b store.StateBroker, d *brokers.Delivery, results []*tasks.TaskResult, next []*tasks.Signature, take *brokers.Take) (*brokers.Delivery, error) {
	return b.AckSuccess(ctx, d, tasks.NewSuccessTaskState(d.Signature, results), next, take)
}
