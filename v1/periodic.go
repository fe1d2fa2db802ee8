package machinist

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

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

// scheduler fires periodic entries. Its goroutine starts with the first
// entry and stops with Server.Close.
type scheduler struct {
	server *Server

	mu      sync.Mutex
	entries []*periodicEntry
	started bool
	stopped bool
	changed chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

type periodicEntry struct {
	name, spec string
	schedule   cron.Schedule
	next       time.Time
	fire       func(ctx context.Context) error
}

func newScheduler(s *Server) *scheduler {
	return &scheduler{server: s, changed: make(chan struct{}, 1)}
}

func (sc *scheduler) add(spec, name string, fire func(ctx context.Context) error) error {
	if name == "" {
		return fmt.Errorf("machinist: periodic task with spec %q has no name", spec)
	}
	schedule, err := cron.ParseStandard(spec)
	if err != nil {
		return fmt.Errorf("machinist: periodic task %q: spec %q: %w", name, spec, err)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.stopped {
		return ErrServerClosed
	}
	sc.entries = append(sc.entries, &periodicEntry{
		name: name, spec: spec, schedule: schedule, next: schedule.Next(time.Now()), fire: fire,
	})
	if !sc.started {
		sc.started = true
		ctx, cancel := context.WithCancel(context.Background())
		sc.cancel, sc.done = cancel, make(chan struct{})
		go sc.run(ctx)
	}
	select {
	case sc.changed <- struct{}{}:
	default:
	}
	return nil
}

func (sc *scheduler) run(ctx context.Context) {
	defer close(sc.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		sc.mu.Lock()
		var earliest time.Time
		for _, e := range sc.entries {
			if earliest.IsZero() || e.next.Before(earliest) {
				earliest = e.next
			}
		}
		sc.mu.Unlock()
		timer.Reset(time.Until(earliest))
		select {
		case <-ctx.Done():
			return
		case <-sc.changed:
			continue
		case <-timer.C:
		}
		now := time.Now()
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

func (sc *scheduler) stop() {
	sc.mu.Lock()
	sc.stopped = true
	cancel, done := sc.cancel, sc.done
	sc.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
