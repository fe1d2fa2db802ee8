package machinery

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/v1/tasks"
)

// RegisterPeriodicTask sends a copy of signature, with a UUID of its own, on
// the cron schedule spec
// (five fields, or descriptors such as "@every 1m", as machinery's). Every
// process that registers the same name and spec shares each tick: the
// broker's Claim lets exactly one of them send it.
func (s *Server) RegisterPeriodicTask(spec, name string, signature *tasks.Signature) error {
	if err := signature.Validate(); err != nil {
		return fmt.Errorf("machinist: periodic task %q: %w", name, err)
	}
	return s.scheduler.add(spec, name, func(ctx context.Context) error {
		_, err := s.SendTaskWithContext(ctx, freshCopies(signature)[0])
		return err
	})
}

// RegisterPeriodicChain sends a chain of copies of signatures on the
// schedule spec; see RegisterPeriodicTask.
func (s *Server) RegisterPeriodicChain(spec, name string, signatures ...*tasks.Signature) error {
	if _, err := tasks.NewChain(freshCopies(signatures...)...); err != nil {
		return fmt.Errorf("machinist: periodic chain %q: %w", name, err)
	}
	return s.scheduler.add(spec, name, func(ctx context.Context) error {
		chain, err := tasks.NewChain(freshCopies(signatures...)...)
		if err != nil {
			return err
		}
		_, err = s.SendChainWithContext(ctx, chain)
		return err
	})
}

// RegisterPeriodicGroup sends a group of copies of signatures on the
// schedule spec; see RegisterPeriodicTask.
func (s *Server) RegisterPeriodicGroup(spec, name string, sendConcurrency int, signatures ...*tasks.Signature) error {
	if _, err := tasks.NewGroup(freshCopies(signatures...)...); err != nil {
		return fmt.Errorf("machinist: periodic group %q: %w", name, err)
	}
	return s.scheduler.add(spec, name, func(ctx context.Context) error {
		group, err := tasks.NewGroup(freshCopies(signatures...)...)
		if err != nil {
			return err
		}
		_, err = s.SendGroupWithContext(ctx, group, sendConcurrency)
		return err
	})
}

// RegisterPeriodicChord sends a chord of copies of signatures and callback
// on the schedule spec; see RegisterPeriodicTask.
func (s *Server) RegisterPeriodicChord(spec, name string, sendConcurrency int, callback *tasks.Signature, signatures ...*tasks.Signature) error {
	build := func() (*tasks.Chord, error) {
		group, err := tasks.NewGroup(freshCopies(signatures...)...)
		if err != nil {
			return nil, err
		}
		return tasks.NewChord(group, freshCopies(callback)[0])
	}
	if _, err := build(); err != nil {
		return fmt.Errorf("machinist: periodic chord %q: %w", name, err)
	}
	return s.scheduler.add(spec, name, func(ctx context.Context) error {
		chord, err := build()
		if err != nil {
			return err
		}
		_, err = s.SendChordWithContext(ctx, chord, sendConcurrency)
		return err
	})
}

// freshCopies copies sigs for one tick: each tick is a task (or workflow)
// of its own, so the copies and their callbacks lose their UUIDs and get new
// ones when sent.
func freshCopies(sigs ...*tasks.Signature) []*tasks.Signature {
	out := tasks.CopySignatures(sigs...)
	for _, s := range out {
		clearUUIDs(s, 0)
	}
	return out
}

func clearUUIDs(s *tasks.Signature, depth int) {
	if s == nil || depth > 1000 {
		return
	}
	s.UUID, s.GroupUUID, s.GroupTaskCount = "", "", 0
	for _, cb := range append(append([]*tasks.Signature(nil), s.OnSuccess...), s.OnError...) {
		clearUUIDs(cb, depth+1)
	}
	clearUUIDs(s.ChordCallback, depth+1)
}

// scheduler fires periodic entries. It is a service.Service, started by its
// first entry (a Server has no Start of its own) and stopped by
// Server.Close through Stop (which waits for the ticks being sent; no entry
// can be added afterwards). It waits on one timer of its clock, armed for
// the earliest next tick; an entry added meanwhile re-arms it.
type scheduler struct {
	service.Base
	server *Server
	// clock times the ticks: clock.Real(); a test sets a clock.Fake
	// before the first entry.
	clock clock.Clock

	mu      sync.Mutex
	entries []*periodicEntry

	// changed tells the loop that an entry was added; it closes the
	// channel it receives once it has armed its timer for the entries.
	changed chan chan struct{}
	// exited is closed when the loop stops taking changes, before it waits
	// for the ticks in flight (one of which may be calling add).
	exited chan struct{}
}

type periodicEntry struct {
	name, spec string
	schedule   cron.Schedule
	next       time.Time // guarded by scheduler.mu
	fire       func(ctx context.Context) error
}

var _ service.Service = (*scheduler)(nil)

func newScheduler(s *Server) *scheduler {
	return &scheduler{
		server:  s,
		clock:   clock.Real(),
		changed: make(chan chan struct{}),
		exited:  make(chan struct{}),
	}
}

func (sc *scheduler) add(spec, name string, fire func(ctx context.Context) error) error {
	if name == "" {
		return fmt.Errorf("machinist: periodic task with spec %q has no name", spec)
	}
	schedule, err := cron.ParseStandard(spec)
	if err != nil {
		return fmt.Errorf("machinist: periodic task %q: spec %q: %w", name, spec, err)
	}
	// The scheduler runs until Server.Close, not for a caller's request:
	// there is no context to inherit. Start does nothing if it is running,
	// and fails once Close has stopped it.
	if err := sc.Start(context.Background()); err != nil {
		return ErrServerClosed
	}
	sc.mu.Lock()
	sc.entries = append(sc.entries, &periodicEntry{
		name: name, spec: spec, schedule: schedule, next: schedule.Next(sc.clock.Now()), fire: fire,
	})
	sc.mu.Unlock()
	// Return once the loop has armed its timer for the new entry: the
	// entry's first tick cannot be missed, and a test can move its clock
	// as soon as add returns.
	armed := make(chan struct{})
	select {
	case sc.changed <- armed:
		<-armed // the loop always closes it before waiting again
		return nil
	case <-sc.exited:
		return ErrServerClosed
	}
}

// Start launches the scheduler's goroutine; see service.Service. add calls
// it.
func (sc *scheduler) Start(ctx context.Context) error {
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

func (sc *scheduler) run(ctx context.Context) {
	// On return, in this order: add stops waiting for the loop, the timer
	// is stopped, and the ticks in flight, whose ctx is now cancelled, are
	// waited for.
	var wg sync.WaitGroup
	defer wg.Wait()
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	defer close(sc.exited)

	var armed chan struct{} // from add, closed once the timer is armed
	for {
		var due <-chan time.Time // nil, blocking, while there is no entry
		if earliest, ok := sc.earliest(); ok {
			wait := sc.clock.Until(earliest)
			if timer == nil {
				timer = sc.clock.NewTimer(wait)
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
		now := sc.clock.Now()
		sc.mu.Lock()
		for _, e := range sc.entries {
			if e.next.After(now) {
				continue
			}
			tick := e.next
			e.next = e.schedule.Next(now)
			wg.Add(1)
			go func(e *periodicEntry, tick, next time.Time) {
				defer wg.Done()
				sc.fireOnce(ctx, e, tick, next)
			}(e, tick, e.next)
		}
		sc.mu.Unlock()
	}
}

// earliest returns the next tick of the entries, and false if there is no
// entry.
func (sc *scheduler) earliest() (time.Time, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var earliest time.Time
	for _, e := range sc.entries {
		if earliest.IsZero() || e.next.Before(earliest) {
			earliest = e.next
		}
	}
	return earliest, !earliest.IsZero()
}

// fireOnce sends the entry's work for tick unless another process did.
func (sc *scheduler) fireOnce(ctx context.Context, e *periodicEntry, tick, next time.Time) {
	log := sc.server.log.With(slog.String("periodic", e.name), slog.String("spec", e.spec), slog.Time("tick", tick))
	key := fmt.Sprintf("periodic:%s:%s:%d", e.name, e.spec, tick.Unix())
	ttl := max(next.Sub(tick), time.Second)
	won, err := sc.server.claim(ctx, key, ttl)
	if err != nil {
		log.Error("claiming periodic tick failed", slog.Any("error", err))
		return
	}
	if !won {
		return
	}
	if err := e.fire(ctx); err != nil {
		log.Error("sending periodic task failed", slog.Any("error", err))
	}
}
