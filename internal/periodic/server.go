package periodic

import (
	"context"
	"time"

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
	RecordPeriodic(ctx context.Context, e *store.PeriodicEntry) error
	RecordPeriodicTick(ctx context.Context, name, spec string, last store.PeriodicTick) error
	Holds(ctx context.Context, sigs ...*tasks.Signature) ([]bool, error)
	GetStateContext(ctx context.Context, taskUUID string) (*tasks.TaskState, error)
	GroupTaskStatesContext(ctx context.Context, groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error)
}
