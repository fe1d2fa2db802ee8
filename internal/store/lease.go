package store

import (
	"context"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/clock"
)

// Lease is a worker's claim on one task it took from a broker. The broker
// that granted it knows when it ends; the worker renews it with
// Broker.ExtendLeases while the task runs. Done is closed when the lease is
// lost: it ran out before being renewed, a renewal found that the broker no
// longer counts it as ours, or the worker gave it up. A worker whose lease is
// lost stops the task and writes nothing about it, because the broker may
// already have handed the task to someone else.
//
// The lease also expires by itself, on a local timer, at its expiry time: a
// worker cut off from its broker stops believing it holds the task at the
// moment the broker stops believing it.
type Lease struct {
	clock clock.Clock
	token string
	ctx   context.Context // ends when the lease is lost
	lose  context.CancelFunc

	mu        sync.Mutex
	expiresAt time.Time
	timer     clock.Timer
	lost      bool
	released  bool
}

// NewLease returns a lease with the fencing token token that ends at
// expiresAt unless extended, by the wall clock.
func NewLease(token string, expiresAt time.Time) *Lease {
	return NewLeaseOn(clock.Real(), token, expiresAt)
}

// NewLeaseOn is NewLease on clk: a broker whose clock a test controls
// hands out leases on the same clock.
func NewLeaseOn(clk clock.Clock, token string, expiresAt time.Time) *Lease {
	// The lease outlives the call that took it: its context is its own,
	// cancelled when the lease is lost.
	ctx, lose := context.WithCancel(context.Background())
	l := &Lease{clock: clk, token: token, ctx: ctx, lose: lose, expiresAt: expiresAt}
	l.mu.Lock() // expire may run before AfterFunc returns
	defer l.mu.Unlock()
	l.timer = clk.AfterFunc(clk.Until(expiresAt), l.expire)
	return l
}

// Token is the fencing token: the broker accepts an acknowledgement, retry or
// archive of the task only with the token of its current lease.
func (l *Lease) Token() string { return l.token }

// ExpiresAt returns when the lease ends unless extended.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Done is closed when the lease is lost.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Context returns a context that ends when the lease is lost, for
// context.AfterFunc: a task's context is cancelled with its lease without a
// goroutine waiting on Done.
func (l *Lease) Context() context.Context { return l.ctx }

// Valid reports whether the lease is held: not lost, and its expiry not
// reached by the clock (a lease whose expiry passed is lost at that moment,
// even if the timer that marks it has not fired yet, as when the process
// was paused). A released lease stays valid: releasing means the task was
// settled while the lease was held.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lost && !l.released && !l.clock.Now().Before(l.expiresAt) {
		l.loseLocked()
	}
	return !l.lost
}

// Extend moves the expiry to expiresAt. It reports false, and changes
// nothing, when the lease is already lost.
func (l *Lease) Extend(expiresAt time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return false
	}
	l.expiresAt = expiresAt
	if !l.released {
		l.timer.Reset(l.clock.Until(expiresAt))
	}
	return true
}

// Lose marks the lease lost and closes Done. Safe to call more than once.
func (l *Lease) Lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked()
}

// Release stops the local expiry timer once the task is settled (acknowledged,
// retried, archived or requeued); the lease is then neither valid nor lost in
// any way that matters. Safe to call more than once.
func (l *Lease) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = true
	l.timer.Stop()
}

func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || l.clock.Now().Before(l.expiresAt) {
		return // extended after the timer fired, or settled
	}
	l.loseLocked()
}

func (l *Lease) loseLocked() {
	if l.lost {
		return
	}
	l.lost = true
	l.timer.Stop()
	l.lose()
}
