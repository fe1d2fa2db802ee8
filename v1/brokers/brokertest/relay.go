package brokertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/b6192125/machinist/internal/store"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// testAckTake holds a broker to Relay.AckTake: it acknowledges the task
// and takes the next task of its queue, in order, under a lease of its
// own that renews and settles as a fetched one's; tasks rerouted to the
// caller's names come first, and none without names; nothing is taken
// from a paused or empty queue; a caller that lost the lease gets
// ErrLeaseLost and takes nothing.
func testAckTake(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	sigs := newSigs(q, "add", 3)
	publish(t, b, sigs...)

	d := fetchOne(t, b, q)
	next, err := b.AckTake(ctx, d, brokers.Take{})
	must(t, "AckTake", err)
	if next == nil || next.Signature.UUID != sigs[1].UUID {
		t.Fatalf("AckTake took %v, want the next task %s", describeDelivery(next), sigs[1].UUID)
	}
	sameSignature(t, "task taken", next.Signature, sigs[1])
	if next.Queue != q || !next.Lease.Valid() || next.Lease.Token() == d.Lease.Token() {
		t.Fatalf("task taken: queue %q, lease valid %t, token %q (the settled task's %q); want %q, a valid lease of its own",
			next.Queue, next.Lease.Valid(), next.Lease.Token(), d.Lease.Token(), q)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Active: 1})

	// The settled task's holder takes nothing more.
	stale, err := b.AckTake(ctx, d, brokers.Take{})
	wantLeaseLost(t, "AckTake of a settled task", err, d)
	if stale != nil {
		t.Fatalf("a refused AckTake took %s", stale.Signature.UUID)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Active: 1})

	// The lease taken renews like a fetched one's.
	must(t, "ExtendLeases", b.ExtendLeases(ctx, next))
	if !next.Lease.Valid() {
		t.Fatal("the lease of a task taken by AckTake was not renewed")
	}

	// Paused: nothing is taken.
	must(t, "PauseQueue", b.PauseQueue(ctx, q))
	none, err := b.AckTake(ctx, next, brokers.Take{})
	must(t, "AckTake on a paused queue", err)
	if none != nil {
		t.Fatalf("AckTake took %s from a paused queue", none.Signature.UUID)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Paused: true, Pending: 1})
	must(t, "ResumeQueue", b.ResumeQueue(ctx, q))

	// Empty: nothing is taken.
	last := fetchOne(t, b, q)
	none, err = b.AckTake(ctx, last, brokers.Take{})
	must(t, "AckTake on an empty queue", err)
	if none != nil {
		t.Fatalf("AckTake took %s from an empty queue", none.Signature.UUID)
	}
	wantSizes(t, b, q, brokers.QueueInfo{})
}

// testAckTakeRerouted: AckTake takes the tasks rerouted to the caller's
// names first, and none without names.
func testAckTakeRerouted(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	mul := brokers.NewTaskNames([]string{"mul"})
	holder, m, p := newSig(q, "add"), newSig(q, "mul"), newSig(q, "add")
	publish(t, b, holder, m, p)
	ds := fetch(t, b, []string{q}, 2)
	wantOrder(t, "fetched", deliveryUUIDs(ds), []string{holder.UUID, m.UUID})
	must(t, "Announce", b.Announce(ctx, []string{q}, mul, time.Minute))
	if ok, err := b.Reroute(ctx, ds[1]); !ok || err != nil {
		t.Fatalf("Reroute = %v, %v; want true, nil", ok, err)
	}

	next, err := b.AckTake(ctx, ds[0], brokers.Take{})
	must(t, "AckTake without names", err)
	if next == nil || next.Signature.UUID != p.UUID {
		t.Fatalf("AckTake without names took %v, want the pending %s, not the rerouted %s", describeDelivery(next), p.UUID, m.UUID)
	}
	next, err = b.AckTake(ctx, next, brokers.Take{Names: mul})
	must(t, "AckTake with names", err)
	if next == nil || next.Signature.UUID != m.UUID {
		t.Fatalf("AckTake with names took %v, want the rerouted %s", describeDelivery(next), m.UUID)
	}
	ack(t, b, next)
	wantSizes(t, b, q, brokers.QueueInfo{})
}

// describeDelivery names d's task, or says there is none.
func describeDelivery(d *brokers.Delivery) string {
	if d == nil {
		return "nothing"
	}
	return "task " + d.Signature.UUID
}

// testAckSuccessTakes: AckSuccess with a take takes the next task of the
// settled task's queue, which may be a next task it has just sent there
// (a chain's next step runs in the slot its previous step freed); a next
// task sent to another queue is not taken.
func testAckSuccessTakes(t *testing.T, newPair func(t *testing.T, cnf *config.Config) (PairedBroker, backends.ContextBackend)) {
	b, be := pair(t, newPair)
	ctx := context.Background()
	q, other := queueName(t, "q"), queueName(t, "other")
	results := []*tasks.TaskResult{{Type: "int64", Value: 7}}

	first, step, elsewhere := newSig(q, "add"), newSig(q, "add"), newSig(other, "add")
	must(t, "PublishPending", b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{first}}))
	d := fetchOne(t, b, q)
	next, err := ackSuccess(ctx, b, d, results, []*tasks.Signature{step}, &brokers.Take{})
	must(t, "AckSuccess with a take", err)
	if next == nil || next.Signature.UUID != step.UUID || !next.Lease.Valid() {
		t.Fatalf("AckSuccess took %v, want the next step %s under a valid lease", describeDelivery(next), step.UUID)
	}
	sameSignature(t, "step taken", next.Signature, step)
	wantState(t, be, first.UUID, tasks.StateSuccess)
	wantState(t, be, step.UUID, tasks.StatePending)
	wantSizes(t, b, q, brokers.QueueInfo{Active: 1})

	none, err := ackSuccess(ctx, b, next, results, []*tasks.Signature{elsewhere}, &brokers.Take{})
	must(t, "AckSuccess sending to another queue", err)
	if none != nil {
		t.Fatalf("AckSuccess took %s, want nothing: its queue is empty", none.Signature.UUID)
	}
	wantSizes(t, b, q, brokers.QueueInfo{})
	wantSizes(t, b, other, brokers.QueueInfo{Pending: 1})
	wantState(t, be, step.UUID, tasks.StateSuccess)
}

// testAckSuccessChordDue: AckSuccess settles a chord member whose success
// leaves its group unfinished, and takes the next task; the member that
// completes the group is written (state, group record) and committed but
// not settled (ErrChordDue, the lease held, nothing taken): acknowledged
// later, or, when its lease ends first, taken again with its outcome.
func testAckSuccessChordDue(t *testing.T, newPair func(t *testing.T, cnf *config.Config) (PairedBroker, backends.ContextBackend)) {
	b, be := pair(t, newPair)
	ctx := context.Background()
	q := queueName(t, "q")
	results := []*tasks.TaskResult{{Type: "int64", Value: 7}}
	group := "group_" + uuid.NewString()
	callback := newSig(q, "sum")
	members := []*tasks.Signature{newSig(q, "add"), newSig(q, "add"), newSig(q, "add")}
	for _, m := range members {
		m.GroupUUID, m.GroupTaskCount, m.ChordCallback = group, len(members), callback
	}
	must(t, "InitGroup", be.InitGroupContext(ctx, group, []string{members[0].UUID, members[1].UUID, members[2].UUID}))
	must(t, "PublishPending", b.PublishPending(ctx, store.SendParams{Tasks: members}))

	first := fetchOne(t, b, q)
	next, err := ackSuccess(ctx, b, first, results, nil, &brokers.Take{})
	must(t, "AckSuccess of a member that leaves its group unfinished", err)
	if next == nil || next.Signature.UUID != members[1].UUID {
		t.Fatalf("AckSuccess took %v, want the next member %s", describeDelivery(next), members[1].UUID)
	}
	must(t, "AckSuccess of the second member", noTake(ackSuccess(ctx, b, next, results, nil, nil)))

	last := fetchOne(t, b, q)
	taken, err := ackSuccess(ctx, b, last, results, nil, &brokers.Take{})
	if !errors.Is(err, brokers.ErrChordDue) || taken != nil {
		t.Fatalf("AckSuccess of the member that completes its group: took %v, %v; want nothing, ErrChordDue", describeDelivery(taken), err)
	}
	if !last.Lease.Valid() {
		t.Fatal("the lease of a member left unsettled (ErrChordDue) is not held")
	}
	wantState(t, be, last.Signature.UUID, tasks.StateSuccess)
	if done, err := be.GroupCompletedContext(ctx, group, len(members)); !done || err != nil {
		t.Fatalf("GroupCompleted = %t, %v; want true", done, err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Active: 1})

	// Its worker dies before the election: the next holder finishes it.
	endLease(t, b, last)
	eventually(t, "member recovered", func() bool { return queueInfo(t, b, q).Pending == 1 })
	again := fetchOne(t, b, q)
	if again.Outcome == nil || again.Outcome.State != tasks.StateSuccess {
		t.Fatalf("the member taken again has outcome %+v, want its committed SUCCESS", again.Outcome)
	}
	must(t, "Ack", b.Ack(ctx, again))
	wantSizes(t, b, q, brokers.QueueInfo{})
}
