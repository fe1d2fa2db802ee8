package periodic

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// Step is a step of an attempt at a tick, for SchedulerParams.HookFunc.
type Step int

// The steps of an attempt.
const (
	StepClaimed Step = iota // won the claim; about to send
	StepSent                // sent; about to complete the claim
	StepEnded               // the attempt ended (a look again is armed)
)

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
	if e.outcome != nil {
		// For operators only: after the tick is settled, and bounded.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		if err := sc.server.Store().RecordPeriodicTick(rctx, e.name, e.spec, e.outcome(t)); err != nil && !errors.Is(err, store.ErrUnsupported) {
			log.Warn("recording periodic tick for operators failed", slog.Any("error", err))
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
