// Package periodic sends periodic tasks: each tick is sent once across
// every process that registers the same name and spec on brokers that
// share their queues, even when the process sending it dies.
//
// The ticks. Every process computes the same ticks: a five-field cron spec
// names wall-clock times, and "@every D" ticks at the multiples of D
// (whole seconds, at least one, as cron rounds it) since the Unix epoch,
// not D after the process started. A tick is named by its key,
// periodic:<name>:<spec>:<tick in Unix seconds>, and its tasks get UUIDs
// derived from the key and their place in the workflow (Tick.copies), so
// that every process builds the same messages for it. A UUID set on a
// registered signature is not used: each tick's tasks are tasks of their
// own (a fixed UUID would be refused while the previous tick's task is
// queued).
//
// The claim. At the tick, each process asks the broker's Claimer for a
// lease on the key (store.Claimer.ClaimLease) of LeaseDuration.
// The one that wins sends the tick, then completes the claim: the key says
// "done" until its record ends, keep = max(period, 10 × LeaseDuration)
// after it was taken. The others do not forget the tick: they look again
// when the lease ends. Done: nothing to do. Held: look again when that
// lease ends. Ended without being completed (its holder died, or its send
// failed): take it over (ClaimResult.TakenOver) and send what was not
// sent. A process whose send failed looks again in the same way, and every
// process keeps looking until keep after the tick, then gives the tick up
// with an error in its log.
//
// Sending what was not sent. An attempt that took the tick over, and every
// look again, resends (Tick.resend): of the tick's roots (its task, its
// chain's first task, or its group's or chord's members; what follows them
// is sent by the workers that run them) it sends those that no earlier
// attempt sent (Scheduler.unsent). A root was published if and only if the
// broker holds it (Claimer.Holds: queued, scheduled, retrying, running) or
// it has left the broker, which it does only once a worker has written a
// final state (then its state is past PENDING; a group member's is in its
// group's bookkeeping). The broker is asked first and the states are read
// after, so a root that leaves the broker in between is seen by the
// second read. The roots left are sent as a first attempt sends them; of
// a group, when some members were sent, the others are published as
// SendGroup publishes its members (the group's bookkeeping and a chord
// callback's PENDING state were written before any member was). A broker
// that refuses a task or chain as a duplicate has it: it counts as sent.
//
// Why each tick is sent exactly once:
//
//  1. Not lost: a claim is completed only after a send that succeeded;
//     until then, each time a lease on the tick ends, a process that
//     fired it takes it over and sends what was not sent.
//  2. One sender at a time: an attempt sends only under its lease, and
//     only in the first half of it by its own clock, counted from before
//     it asked for the lease; another process takes the tick over only
//     once the lease has ended by the broker's clock. The second half is
//     for a publish still on its way when the sender stopped (or died).
//  3. No root sent twice: by 2, every publish of an earlier attempt landed
//     before the attempt that took over reads. A root published then is,
//     at its first read, held by the broker or gone from it with a final
//     state, which the second read, later, finds (states last
//     ResultsExpireIn). So a root found in neither was never published,
//     and publishing it now is its first publish.
//  4. The first attempt at a tick sends without reading only when it
//     fires within a lease of the tick and the key was free: no attempt
//     preceded it, since every attempt's record lasts keep. An attempt
//     later than a lease reads first, as a resend does; one later than
//     keep less a lease, when the record may be gone, is skipped.
//
// What this assumes: the processes' clocks run at the broker's rate and
// agree within keep; a publish lands within half a lease; a finished
// root's state outlives the resends that may read it: ResultsExpireIn is
// longer than keep (the default hour is, for periods up to an hour; a
// daily tick keeps its claim a day, so a takeover after the state expired,
// which needs the sender to die between sending and completing and Redis
// to be unreachable for longer than ResultsExpireIn, may send it again);
// the claim key is not lost (a Sentinel failover with asynchronous
// replication can lose it: Redis.MinReplicas prevents that); and no task
// leaves the broker without a final state (one that
// IgnoreWhenTaskNotRegistered drops does: a process that takes its tick
// over sends it again).
//
// Cost, per tick (Redis round trips): the sender claims and completes;
// every other process claims, and claims again when the lease ends, to
// find the tick done. A resend adds a pipelined read of the roots' task
// hashes and a read of their states (one for a group).
package periodic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Server is what a Scheduler needs of the machinery Server it sends for.
type Server interface {
	// Err returns the error that keeps the Server from sending anything
	// (its config was refused), or nil.
	Err() error
	// LeaseDuration is how long a process has to send a tick before
	// another may take it over.
	LeaseDuration() time.Duration
	// Claim takes a tick's key as store.Claimer.ClaimLease does. Without
	// a Claimer it answers as the Server can: ClaimWon without a token
	// (there is no claim to complete), or ClaimDone when another process
	// holds the tick.
	Claim(ctx context.Context, key string, lease, keep time.Duration) (store.ClaimResult, error)
	// Store returns the store the Server sends to now.
	Store() Store
	// Prepare fills in what sig needs to travel (its UUID, its queue), as
	// a send does.
	Prepare(sig *tasks.Signature)
	SendTask(ctx context.Context, sig *tasks.Signature) error
	SendChain(ctx context.Context, chain *tasks.Chain) error
	SendGroup(ctx context.Context, group *tasks.Group, sendConcurrency int) error
	SendChord(ctx context.Context, chord *tasks.Chord, sendConcurrency int) error
	// PublishMembers publishes members of a group whose bookkeeping was
	// written, as SendGroup publishes its members.
	PublishMembers(ctx context.Context, members []*tasks.Signature, sendConcurrency int) error
}

// Store is the part of store.Store that a Scheduler calls: completing a
// claim, and finding what an earlier attempt at a tick sent.
type Store interface {
	CompleteClaim(ctx context.Context, key, token string) error
	Holds(ctx context.Context, sigs ...*tasks.Signature) ([]bool, error)
	GetStateContext(ctx context.Context, taskUUID string) (*tasks.TaskState, error)
	GroupTaskStatesContext(ctx context.Context, groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error)
}

// periodicNamespace seeds the UUIDs derived for periodic ticks.
var periodicNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/b6192125/machinist/periodic"))

// keepLeases is, in leases, how long at least a tick is tried and its
// claim kept: keep = max(period, keepLeases × LeaseDuration).
const keepLeases = 10

// AddTask sends a copy of signature on the cron schedule spec; see
// machinery's Server.RegisterPeriodicTask. It returns service.ErrStopped
// once the scheduler is stopped.
func (sc *Scheduler) AddTask(spec, name string, signature *tasks.Signature) error {
	if err := signature.Validate(); err != nil {
		return fmt.Errorf("machinist: periodic task %q: %w", name, err)
	}
	return sc.add(spec, name, func(ctx context.Context, t Tick) error {
		sig := t.copies("", signature)[0]
		return sc.sendOnce(ctx, t, sig, func(ctx context.Context) error {
			return sc.server.SendTask(ctx, sig)
		})
	})
}

// AddChain sends a chain of copies of signatures on the schedule spec;
// see AddTask.
func (sc *Scheduler) AddChain(spec, name string, signatures ...*tasks.Signature) error {
	if _, err := tasks.NewChain(tasks.CopySignatures(signatures...)...); err != nil {
		return fmt.Errorf("machinist: periodic chain %q: %w", name, err)
	}
	return sc.add(spec, name, func(ctx context.Context, t Tick) error {
		chain, err := tasks.NewChain(t.copies("", signatures...)...)
		if err != nil {
			return err
		}
		return sc.sendOnce(ctx, t, chain.Tasks[0], func(ctx context.Context) error {
			return sc.server.SendChain(ctx, chain)
		})
	})
}

// AddGroup sends a group of copies of signatures on the schedule spec;
// see AddTask.
func (sc *Scheduler) AddGroup(spec, name string, sendConcurrency int, signatures ...*tasks.Signature) error {
	if _, err := tasks.NewGroup(tasks.CopySignatures(signatures...)...); err != nil {
		return fmt.Errorf("machinist: periodic group %q: %w", name, err)
	}
	return sc.add(spec, name, func(ctx context.Context, t Tick) error {
		group, err := t.group(signatures...)
		if err != nil {
			return err
		}
		return sc.sendGroupOnce(ctx, t, group, nil, sendConcurrency, func(ctx context.Context) error {
			return sc.server.SendGroup(ctx, group, sendConcurrency)
		})
	})
}

// AddChord sends a chord of copies of signatures and callback on the
// schedule spec; see AddTask.
func (sc *Scheduler) AddChord(spec, name string, sendConcurrency int, callback *tasks.Signature, signatures ...*tasks.Signature) error {
	build := func(t Tick) (*tasks.Chord, error) {
		group, err := t.group(signatures...)
		if err != nil {
			return nil, err
		}
		cb := t.copies("callback", callback)[0]
		if cb != nil {
			cb.UUID = t.UUID("chord_", "callback")
		}
		return tasks.NewChord(group, cb)
	}
	if _, err := build(Tick{}); err != nil {
		return fmt.Errorf("machinist: periodic chord %q: %w", name, err)
	}
	return sc.add(spec, name, func(ctx context.Context, t Tick) error {
		chord, err := build(t)
		if err != nil {
			return err
		}
		return sc.sendGroupOnce(ctx, t, chord.Group, chord.Callback, sendConcurrency, func(ctx context.Context) error {
			return sc.server.SendChord(ctx, chord, sendConcurrency)
		})
	})
}

// Tick is one tick of a periodic entry, as its send function sees it.
type Tick struct {
	// Key names the tick in the broker's claims and seeds its tasks'
	// UUIDs: periodic:<name>:<spec>:<tick in Unix seconds>.
	Key string
	At  time.Time
	// keep is how long after At the tick is tried, and its claim kept.
	keep time.Duration
	// resend is set when an earlier attempt at the tick may have sent it,
	// in part: on a look again, and on an attempt that took it over.
	resend bool
}

// UUID returns the UUID of the tick's signature at path, with prefix: the
// same in every process.
func (t Tick) UUID(prefix, path string) string {
	return prefix + uuid.NewSHA1(periodicNamespace, []byte(t.Key+"\x00"+path)).String()
}

// copies copies sigs for the tick: the copies and their callbacks get
// UUIDs derived from the tick and their place (under path), and no group.
func (t Tick) copies(path string, sigs ...*tasks.Signature) []*tasks.Signature {
	out := tasks.CopySignatures(sigs...)
	for i, s := range out {
		t.name(s, path+"/"+strconv.Itoa(i), 0)
	}
	return out
}

// name gives s and its callbacks the UUIDs of their places under path,
// down to a depth that only a cyclic signature reaches.
func (t Tick) name(s *tasks.Signature, path string, depth int) {
	if s == nil || depth > 1000 {
		return
	}
	s.UUID, s.GroupUUID, s.GroupTaskCount = t.UUID("task_", path), "", 0
	for i, cb := range s.OnSuccess {
		t.name(cb, path+"/s"+strconv.Itoa(i), depth+1)
	}
	for i, cb := range s.OnError {
		t.name(cb, path+"/e"+strconv.Itoa(i), depth+1)
	}
	if cb := s.ChordCallback; cb != nil {
		t.name(cb, path+"/c", depth+1)
		cb.UUID = t.UUID("chord_", path+"/c")
	}
}

// group makes the tick's group of copies of sigs, with a UUID derived from
// the tick.
func (t Tick) group(sigs ...*tasks.Signature) (*tasks.Group, error) {
	group, err := tasks.NewGroup(t.copies("", sigs...)...)
	if err != nil {
		return nil, err
	}
	group.GroupUUID = t.UUID("group_", "group")
	for _, m := range group.Tasks {
		m.GroupUUID = group.GroupUUID
	}
	return group, nil
}

// sendOnce sends root, a tick's task or its chain's first task, with send;
// on a resend, only if no earlier attempt sent it.
func (sc *Scheduler) sendOnce(ctx context.Context, t Tick, root *tasks.Signature, send func(context.Context) error) error {
	if !t.resend {
		return send(ctx)
	}
	unsent, err := sc.unsent(ctx, "", []*tasks.Signature{root})
	if err != nil || len(unsent) == 0 {
		return err
	}
	if err := send(ctx); err != nil && !errors.Is(err, store.ErrDuplicateTask) {
		return err
	}
	return nil
}

// sendGroupOnce sends group, or the chord of group and callback, with
// send; on a resend, only the members no earlier attempt sent: all of
// them with send when it sent none, else those alone, published as
// SendGroup publishes its members.
func (sc *Scheduler) sendGroupOnce(ctx context.Context, t Tick, group *tasks.Group, callback *tasks.Signature, sendConcurrency int, send func(context.Context) error) error {
	if !t.resend {
		return send(ctx)
	}
	if callback != nil {
		sc.server.Prepare(callback) // as SendChord did
	}
	unsent, err := sc.unsent(ctx, group.GroupUUID, group.Tasks)
	switch {
	case err != nil:
		return err
	case len(unsent) == 0:
		return nil
	case len(unsent) == len(group.Tasks):
		return send(ctx)
	}
	if err := sc.server.PublishMembers(ctx, unsent, sendConcurrency); err != nil {
		return fmt.Errorf("machinist: send the rest of group %s: %w", group.GroupUUID, err)
	}
	return nil
}

// unsent returns those of roots, a tick's task, its chain's first task or
// its group's members (groupUUID), that no earlier attempt at the tick
// sent. A root was sent when the broker holds it, or when it has left the
// broker, which it does once a worker has written its final state: then
// its state is past PENDING, and a group member's is in the group's
// bookkeeping. The broker is asked first, so that a root leaving it
// before the states are read is seen there.
func (sc *Scheduler) unsent(ctx context.Context, groupUUID string, roots []*tasks.Signature) ([]*tasks.Signature, error) {
	for _, r := range roots {
		sc.server.Prepare(r) // the queue it was sent to
	}
	held, err := sc.server.Store().Holds(ctx, roots...)
	if errors.Is(err, store.ErrUnsupported) {
		return roots, nil // no claims, no resends
	}
	if err != nil {
		return nil, fmt.Errorf("machinist: periodic resend: which tasks the broker holds: %w", err)
	}
	var rest []*tasks.Signature
	for i, r := range roots {
		if !held[i] {
			rest = append(rest, r)
		}
	}
	if len(rest) == 0 {
		return nil, nil
	}
	ran, err := sc.ran(ctx, groupUUID, len(roots), rest)
	if err != nil {
		return nil, fmt.Errorf("machinist: periodic resend: task states: %w", err)
	}
	unsent := rest[:0]
	for _, r := range rest {
		if !ran[r.UUID] {
			unsent = append(unsent, r)
		}
	}
	return unsent, nil
}

// ran returns the UUIDs of those of sigs whose state is past PENDING: read
// from the bookkeeping of their group (groupUUID, of count members) or,
// outside a group, from each state.
func (sc *Scheduler) ran(ctx context.Context, groupUUID string, count int, sigs []*tasks.Signature) (map[string]bool, error) {
	backend := sc.server.Store()
	ran := make(map[string]bool)
	if groupUUID != "" {
		states, err := backend.GroupTaskStatesContext(ctx, groupUUID, count)
		if errors.Is(err, store.ErrGroupNotFound) {
			return ran, nil // recorded before any member is sent: none was
		}
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			if st.State != tasks.StatePending {
				ran[st.TaskUUID] = true
			}
		}
		return ran, nil
	}
	for _, sig := range sigs {
		st, err := backend.GetStateContext(ctx, sig.UUID)
		switch {
		case errors.Is(err, store.ErrStateNotFound):
		case err != nil:
			return nil, err
		case st.State != tasks.StatePending:
			ran[sig.UUID] = true
		}
	}
	return ran, nil
}

// completeClaim marks the tick key done for the holder of token.
func (sc *Scheduler) completeClaim(ctx context.Context, key, token string) error {
	if token == "" {
		return nil
	}
	if err := sc.server.Store().CompleteClaim(ctx, key, token); !errors.Is(err, store.ErrUnsupported) {
		return err
	}
	return nil
}

// Scheduler fires periodic entries. It is a service.Service, started by
// its first entry (a machinery Server has no Start of its own) and stopped
// by Server.Close through Stop (which waits for the attempts in flight; no
// entry can be added afterwards). It waits on one timer of its clock,
// armed for the earliest next tick or look again; one added meanwhile
// re-arms it.
type Scheduler struct {
	service.Base
	server Server
	// arch gives the clock that times the ticks and the logger of the
	// attempts.
	arch *service.Archetype
	// lease is how long a process has to send a tick before the others may
	// take it over: zero for the Server's LeaseDuration.
	lease time.Duration
	// hookFunc is SchedulerParams.HookFunc.
	hookFunc func(step Step, t Tick) bool

	mu      sync.Mutex
	entries []*periodicEntry
	again   []lookAgain // ticks to look at again

	// changed tells the loop that an entry or a look again was added; it
	// closes the channel it receives once it has armed its timer for them.
	changed chan chan struct{}
	// exited is closed when the loop stops taking changes, before it waits
	// for the attempts in flight (one of which may be calling add).
	exited chan struct{}
}

// SchedulerParams configures a Scheduler.
type SchedulerParams struct {
	// Server sends the ticks and answers for their claims. Required.
	Server Server
	// Archetype gives the clock that times the ticks and the logger of
	// the attempts. Default service.NewArchetype(nil, nil).
	Archetype *service.Archetype
	// Lease, when positive, replaces Server.LeaseDuration: a test makes
	// it short.
	Lease time.Duration
	// HookFunc, when a test sets it, is called at each step of every
	// attempt at a tick. At StepClaimed and StepSent, false ends the
	// attempt there, as if its process had died.
	HookFunc func(step Step, t Tick) bool
}

type periodicEntry struct {
	name, spec string
	schedule   cron.Schedule
	next       time.Time // guarded by Scheduler.mu
	// sendFunc sends the entry's work for a tick; see Tick.resend.
	sendFunc func(ctx context.Context, t Tick) error
}

// lookAgain is a tick to look at again at a time.
type lookAgain struct {
	e  *periodicEntry
	t  Tick
	at time.Time
}

// Step is a step of an attempt at a tick, for SchedulerParams.HookFunc.
type Step int

// The steps of an attempt.
const (
	StepClaimed Step = iota // won the claim; about to send
	StepSent                // sent; about to complete the claim
	StepEnded               // the attempt ended (a look again is armed)
)

var _ service.Service = (*Scheduler)(nil)

// NewScheduler returns a Scheduler of p. It starts with its first entry.
func NewScheduler(p SchedulerParams) *Scheduler {
	if p.Archetype == nil {
		p.Archetype = service.NewArchetype(nil, nil)
	}
	return &Scheduler{
		server:   p.Server,
		arch:     p.Archetype,
		lease:    p.Lease,
		hookFunc: p.HookFunc,
		changed:  make(chan chan struct{}),
		exited:   make(chan struct{}),
	}
}

// everyAligned is the schedule of "@every D": the multiples of D since the
// Unix epoch, which every process agrees on whenever it started (cron's
// ConstantDelaySchedule ticks D after each process's start).
type everyAligned time.Duration

// Next returns the first multiple of the interval after t.
func (d everyAligned) Next(t time.Time) time.Time {
	step, ns := int64(d), t.UnixNano()
	q := ns / step
	if ns%step < 0 {
		q-- // floor, before the epoch
	}
	return time.Unix(0, (q+1)*step).In(t.Location())
}

func (sc *Scheduler) add(spec, name string, sendFunc func(ctx context.Context, t Tick) error) error {
	if name == "" {
		return fmt.Errorf("machinist: periodic task with spec %q has no name", spec)
	}
	if err := sc.server.Err(); err != nil {
		return err
	}
	schedule, err := cron.ParseStandard(spec)
	if err != nil {
		return fmt.Errorf("machinist: periodic task %q: spec %q: %w", name, spec, err)
	}
	if every, ok := schedule.(cron.ConstantDelaySchedule); ok {
		schedule = everyAligned(every.Delay) // whole seconds, at least one
	}
	// The scheduler runs until Stop, not for a caller's request: there is
	// no context to inherit. Start does nothing if it is running, and
	// fails once Stop has been called.
	if err := sc.Start(context.Background()); err != nil {
		return err
	}
	sc.mu.Lock()
	sc.entries = append(sc.entries, &periodicEntry{
		name: name, spec: spec, schedule: schedule, next: schedule.Next(sc.arch.Clock.Now()), sendFunc: sendFunc,
	})
	sc.mu.Unlock()
	// Return once the loop has armed its timer for the new entry: the
	// entry's first tick cannot be missed, and a test can move its clock
	// as soon as add returns.
	if !sc.rearm() {
		return service.ErrStopped
	}
	return nil
}

// rearm makes the loop arm its timer again for what was added, and waits
// until it has; false if the loop has stopped.
func (sc *Scheduler) rearm() bool {
	armed := make(chan struct{})
	select {
	case sc.changed <- armed:
		<-armed // the loop always closes it before waiting again
		return true
	case <-sc.exited:
		return false
	}
}

// Start launches the scheduler's goroutine; see service.Service. Adding
// an entry calls it.
func (sc *Scheduler) Start(ctx context.Context) error {
	ctx, shouldStart, stopped, err := sc.StartInit(ctx)
	if !shouldStart {
		return err
	}
	go func() {
		defer close(stopped)
		sc.run(ctx)
	}()
	return nil
}

func (sc *Scheduler) run(ctx context.Context) {
	// On return, in this order: add and lookAgain stop waiting for the
	// loop, the timer is stopped, and the attempts in flight, whose ctx is
	// now cancelled, are waited for.
	var wg sync.WaitGroup
	defer wg.Wait()
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	defer close(sc.exited)

	var armed chan struct{} // from rearm, closed once the timer is armed
	for {
		var due <-chan time.Time // nil, blocking, while there is nothing to do
		if earliest, ok := sc.earliest(); ok {
			wait := sc.arch.Clock.Until(earliest)
			if timer == nil {
				timer = sc.arch.Clock.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			due = timer.C()
		}
		if armed != nil {
			close(armed)
			armed = nil
		}
		select {
		case <-ctx.Done():
			return
		case armed = <-sc.changed:
			continue
		case <-due:
		}
		for _, a := range sc.due(sc.arch.Clock.Now()) {
			wg.Go(func() { sc.attempt(ctx, a.e, a.t) })
		}
	}
}

// due returns the attempts due at now: the entries' ticks, whose next
// ticks it sets, and the look agains, which it forgets.
func (sc *Scheduler) due(now time.Time) []lookAgain {
	var due []lookAgain
	sc.mu.Lock()
	for _, e := range sc.entries {
		if !e.next.After(now) {
			due = append(due, lookAgain{e: e, at: e.next})
			e.next = e.schedule.Next(now)
		}
	}
	again := sc.again[:0]
	for _, a := range sc.again {
		if a.at.After(now) {
			again = append(again, a)
		} else {
			due = append(due, a)
		}
	}
	clear(sc.again[len(again):])
	sc.again = again
	sc.mu.Unlock()
	for i, a := range due {
		if a.t.Key == "" { // a tick, not a look again
			due[i].t = sc.newTick(a.e, a.at)
		}
	}
	return due
}

// earliest returns the next tick of the entries or look again, and false
// if there is none.
func (sc *Scheduler) earliest() (time.Time, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var earliest time.Time
	for _, e := range sc.entries {
		if earliest.IsZero() || e.next.Before(earliest) {
			earliest = e.next
		}
	}
	for _, a := range sc.again {
		if earliest.IsZero() || a.at.Before(earliest) {
			earliest = a.at
		}
	}
	return earliest, !earliest.IsZero()
}

// leaseDuration is how long a process has to send a tick before another
// may take it over.
func (sc *Scheduler) leaseDuration() time.Duration {
	if sc.lease > 0 {
		return sc.lease
	}
	return sc.server.LeaseDuration()
}

// newTick returns e's tick at.
func (sc *Scheduler) newTick(e *periodicEntry, at time.Time) Tick {
	period := e.schedule.Next(at).Sub(at)
	return Tick{
		Key:  fmt.Sprintf("periodic:%s:%s:%d", e.name, e.spec, at.Unix()),
		At:   at,
		keep: max(period, keepLeases*sc.leaseDuration()),
	}
}

// hook calls hookFunc, if a test set it, and says whether to go on.
func (sc *Scheduler) hook(step Step, t Tick) bool {
	return sc.hookFunc == nil || sc.hookFunc(step, t)
}

// attempt makes one attempt at tick t of e: it claims the tick and, if it
// won, sends it and completes the claim; otherwise, or if the send failed,
// it arms a look again for when the lease ends. See the package comment.
func (sc *Scheduler) attempt(ctx context.Context, e *periodicEntry, t Tick) {
	defer sc.hook(StepEnded, t)
	log := sc.arch.Logger.With(slog.String("periodic", e.name), slog.String("spec", e.spec), slog.Time("tick", t.At))
	lease := sc.leaseDuration()
	start, startReal := sc.arch.Clock.Now(), time.Now()
	switch late := start.Sub(t.At); {
	case late >= t.keep-lease:
		// The tick's claim record may be gone (it lives keep from when it
		// was taken): a free key would no longer mean that no attempt
		// preceded this one. A process this late (it was paused, or its
		// clock jumped) leaves the tick to those that fired it in time.
		log.Warn("periodic tick skipped: fired too late to know whether another process sent it",
			slog.Duration("late", late), slog.Duration("keep", t.keep))
		return
	case late > lease:
		// Another process may have sent it and seen its claim taken over
		// or completed long ago: read before sending.
		t.resend = true
	}
	claim, err := sc.server.Claim(ctx, t.Key, lease, t.keep)
	if err != nil {
		if ctx.Err() == nil {
			log.Error("claiming periodic tick failed; trying again", slog.Any("error", err), slog.Duration("retry_in", lease))
		}
		sc.lookAgain(ctx, log, e, t, start.Add(lease))
		return
	}
	switch claim.Status {
	case store.ClaimDone:
		return
	case store.ClaimHeld:
		sc.lookAgain(ctx, log, e, t, sc.arch.Clock.Now().Add(claim.Remaining))
		return
	}
	if !sc.hook(StepClaimed, t) {
		return
	}
	t.resend = t.resend || claim.TakenOver
	sendCtx, cancel := ctx, context.CancelFunc(func() {})
	if claim.Token != "" {
		// Sent in the first half of the lease, by this process's clock
		// from before the claim: the second half is for a publish still
		// on its way when the send stops, before another process may take
		// the tick over. A send cut short is finished by the next attempt.
		sendCtx, cancel = context.WithDeadline(ctx, startReal.Add(lease/2))
	}
	err = e.sendFunc(sendCtx, t)
	cancel()
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case claim.Token == "": // no claims: as machinery, each tick is tried once
			log.Error("sending periodic task failed", slog.Any("error", err))
		default:
			log.Error("sending periodic task failed; trying again once its claim ends", slog.Any("error", err), slog.Duration("retry_in", lease))
			sc.lookAgain(ctx, log, e, t, start.Add(lease))
		}
		return
	}
	if !sc.hook(StepSent, t) {
		return
	}
	// If this fails, the other processes take the tick over when its lease
	// ends, and find it sent.
	if err := sc.completeClaim(ctx, t.Key, claim.Token); err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			log.Warn("periodic task sent after its claim ended", slog.Any("error", err))
		} else if ctx.Err() == nil {
			log.Error("marking periodic tick done failed", slog.Any("error", err))
		}
	}
}

// lookAgain arms a look again at tick t of e at at, unless the scheduler is
// stopping or at is past the tick's keep.
func (sc *Scheduler) lookAgain(ctx context.Context, log *slog.Logger, e *periodicEntry, t Tick, at time.Time) {
	if ctx.Err() != nil {
		return
	}
	if at.After(t.At.Add(t.keep)) {
		log.Error("periodic tick given up: it could not be sent, or not be found sent, in time", slog.Duration("tried_for", t.keep))
		return
	}
	t.resend = true
	sc.mu.Lock()
	sc.again = append(sc.again, lookAgain{e: e, t: t, at: at})
	sc.mu.Unlock()
	sc.rearm()
}
