package service

import (
	"context"
	"fmt"
	"time"
)

// PeriodicParams configures a periodic loop: RunEvery and Periodic.
type PeriodicParams struct {
	// Name names the loop in its log lines ("forwarder"). Default
	// "periodic loop".
	Name string
	// Interval is the pause between the end of a successful run and the
	// start of the next one (runs never overlap). Required, > 0.
	Interval time.Duration
	// RunAtStart runs RunFunc at once when the loop starts, rather than
	// one Interval later.
	RunAtStart bool
	// RunFunc is the work. An error counts as a failure: the next run
	// waits Backoff.Delay(consecutive failures) instead of Interval, and
	// the failure is logged through a FailureLog. An error returned
	// because the loop's ctx is done is neither. Required.
	RunFunc func(ctx context.Context) error
	// Backoff sets the delays after failures. The zero Backoff uses its
	// defaults.
	Backoff Backoff
	// Archetype gives the clock that times the loop and the logger that
	// receives its failures. Default NewArchetype(nil, nil).
	Archetype *Archetype
	// LogEvery is how often a failure that goes on is logged. Default
	// DefaultLogEvery (30s).
	LogEvery time.Duration
}

func (p PeriodicParams) withDefaults() (PeriodicParams, error) {
	if p.Interval <= 0 {
		return p, fmt.Errorf("%w: Interval %v is not positive", ErrInvalidParams, p.Interval)
	}
	if p.RunFunc == nil {
		return p, fmt.Errorf("%w: RunFunc is nil", ErrInvalidParams)
	}
	if p.Name == "" {
		p.Name = "periodic loop"
	}
	if p.Archetype == nil {
		p.Archetype = NewArchetype(nil, nil)
	}
	return p, nil
}

// RunEvery calls p.RunFunc every p.Interval, backing off after failures,
// until ctx is done; then it returns nil. It returns an error at once if p
// is invalid.
//
// It waits on one timer, armed again after each run, so that a test with a
// clock.Fake knows that a run has ended when the timer is armed again
// (Fake.BlockUntil(1)).
func RunEvery(ctx context.Context, p PeriodicParams) error {
	p, err := p.withDefaults()
	if err != nil {
		return err
	}
	fails := NewFailureLog(p.Archetype.Logger, p.Archetype.Clock, p.Name, p.LogEvery)
	wait := p.Interval
	if p.RunAtStart {
		wait = 0
	}
	timer := p.Archetype.Clock.NewTimer(wait)
	defer timer.Stop()
	var failures int // consecutive
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
		}
		err := p.RunFunc(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			failures++
			fails.Failed(err)
			wait = p.Backoff.Delay(failures)
		} else {
			failures = 0
			fails.Succeeded()
			wait = p.Interval
		}
		timer.Reset(wait)
	}
}

// Periodic is a Service that runs RunEvery in a goroutine of its own.
type Periodic struct {
	Base
	params PeriodicParams
}

var _ Service = (*Periodic)(nil)

// NewPeriodic returns a Periodic loop; Start checks p.
func NewPeriodic(p PeriodicParams) *Periodic {
	return &Periodic{params: p}
}

// Start launches the loop, which runs until Stop or until ctx is done. It
// returns an error if the params are invalid, ErrStopped after Stop, and
// nil if the loop is already running.
func (p *Periodic) Start(ctx context.Context) error {
	params, err := p.params.withDefaults()
	if err != nil {
		return err
	}
	ctx, shouldStart, stopped, err := p.StartInit(ctx)
	if !shouldStart {
		return err
	}
	go func() {
		defer close(stopped)
		_ = RunEvery(ctx, params) // params are valid: returns nil
	}()
	return nil
}
