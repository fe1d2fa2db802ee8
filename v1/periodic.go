package machinery

import (
	"context"
	"errors"
	"time"

	"github.com/b6192125/machinist/internal/periodic"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// RegisterPeriodicTask sends a copy of signature on the cron schedule spec
// (five fields, or descriptors such as "@every 1m", as machinery's). Every
// process that registers the same name and spec on brokers sharing their
// queues shares each tick, and the tick is sent once across them, even if
// the process sending it dies (internal/periodic/doc.go says how). Each
// tick's copy has a UUID derived from the tick.
func (s *Server) RegisterPeriodicTask(spec, name string, signature *tasks.Signature) error {
	return closedScheduler(s.scheduler.AddTask(spec, name, signature))
}

// RegisterPeriodicChain sends a chain of copies of signatures on the
// schedule spec; see RegisterPeriodicTask.
func (s *Server) RegisterPeriodicChain(spec, name string, signatures ...*tasks.Signature) error {
	return closedScheduler(s.scheduler.AddChain(spec, name, signatures...))
}

// RegisterPeriodicGroup sends a group of copies of signatures on the
// schedule spec; see RegisterPeriodicTask.
func (s *Server) RegisterPeriodicGroup(spec, name string, sendConcurrency int, signatures ...*tasks.Signature) error {
	return closedScheduler(s.scheduler.AddGroup(spec, name, sendConcurrency, signatures...))
}

// RegisterPeriodicChord sends a chord of copies of signatures and callback
// on the schedule spec; see RegisterPeriodicTask.
func (s *Server) RegisterPeriodicChord(spec, name string, sendConcurrency int, callback *tasks.Signature, signatures ...*tasks.Signature) error {
	return closedScheduler(s.scheduler.AddChord(spec, name, sendConcurrency, callback, signatures...))
}

// closedScheduler returns err, or ErrServerClosed when it says that Close
// stopped the scheduler.
func closedScheduler(err error) error {
	if errors.Is(err, service.ErrStopped) {
		return ErrServerClosed
	}
	return err
}

// newScheduler returns the scheduler of s's periodic tasks, on the wall
// clock; it starts with the first of them.
func newScheduler(s *Server) *periodic.Scheduler {
	return periodic.NewScheduler(periodic.SchedulerParams{
		Server:    periodicServer{s},
		Archetype: service.NewArchetype(s.log, nil),
	})
}

// periodicServer is the Server as its periodic scheduler sees it.
type periodicServer struct{ s *Server }

var _ periodic.Server = periodicServer{}

func (p periodicServer) Err() error { return p.s.invalid }

func (p periodicServer) LeaseDuration() time.Duration {
	if d := p.s.GetConfig().LeaseDuration; d > 0 {
		return d
	}
	return config.DefaultLeaseDuration
}

func (p periodicServer) Claim(ctx context.Context, key string, lease, keep time.Duration) (store.ClaimResult, error) {
	return p.s.claim(ctx, key, lease, keep)
}

func (p periodicServer) Store() periodic.Store        { return p.s.store() }
func (p periodicServer) Prepare(sig *tasks.Signature) { p.s.prepare(sig) }

func (p periodicServer) SendTask(ctx context.Context, sig *tasks.Signature) error {
	_, err := p.s.SendTaskWithContext(ctx, sig)
	return err
}

func (p periodicServer) SendChain(ctx context.Context, chain *tasks.Chain) error {
	_, err := p.s.SendChainWithContext(ctx, chain)
	return err
}

func (p periodicServer) SendGroup(ctx context.Context, group *tasks.Group, sendConcurrency int) error {
	_, err := p.s.SendGroupWithContext(ctx, group, sendConcurrency)
	return err
}

func (p periodicServer) SendChord(ctx context.Context, chord *tasks.Chord, sendConcurrency int) error {
	_, err := p.s.SendChordWithContext(ctx, chord, sendConcurrency)
	return err
}

func (p periodicServer) PublishMembers(ctx context.Context, members []*tasks.Signature, sendConcurrency int) error {
	return p.s.publishMembers(ctx, members, sendConcurrency)
}
