package periodic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

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
	// outcome names what says a tick's outcome, recorded once it is sent.
	outcome func(t Tick) store.PeriodicTick
}

// entryInfo is what the record of periodic entries says of one: its kind,
// its signatures, and what says a tick's outcome.
type entryInfo struct {
	kind    string
	sigs    []*tasks.Signature
	outcome func(t Tick) store.PeriodicTick
}

// recordTimeout bounds the write of an entry's record: the record is for
// operators, and a registration does not wait long on it.
const recordTimeout = 5 * time.Second

// record writes what the record of periodic entries says of the entry
// name, spec; a failure is logged, not returned: the entry runs anyway.
func (sc *Scheduler) record(name, spec string, info entryInfo) {
	e := &store.PeriodicEntry{Name: name, Spec: spec, Kind: info.kind, PID: os.Getpid(), Registered: sc.arch.Clock.Now()}
	e.Host, _ = os.Hostname()
	for _, sig := range info.sigs {
		if sig == nil {
			continue
		}
		cp := tasks.CopySignature(sig)
		sc.server.Prepare(cp)
		e.Tasks = append(e.Tasks, cp.Name)
		if !slices.Contains(e.Queues, cp.RoutingKey) {
			e.Queues = append(e.Queues, cp.RoutingKey)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if err := sc.server.Store().RecordPeriodic(ctx, e); err != nil && !errors.Is(err, store.ErrUnsupported) {
		sc.arch.Logger.Warn("recording periodic task for operators failed", slog.String("periodic", name), slog.Any("error", err))
	}
}

// lookAgain is a tick to look at again at a time.
type lookAgain struct {
	e  *periodicEntry
	t  Tick
	at time.Time
}

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

func (sc *Scheduler) add(spec, name string, info entryInfo, sendFunc func(ctx context.Context, t Tick) error) error {
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
		name: name, spec: spec, schedule: schedule, next: schedule.Next(sc.arch.Clock.Now()), sendFunc: sendFunc, outcome: info.outcome,
	})
	sc.mu.Unlock()
	if info.kind != "" {
		sc.record(name, spec, info)
	}
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
