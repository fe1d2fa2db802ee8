package maintenance

import (
	"context"
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// Store is what a Maintainer needs of the store: the queue's election, and
// the jobs it runs while it is the queue's maintainer. *rdb.Store is one.
type Store interface {
	// Elect makes holder the maintainer of queue for term, or renews its
	// term, and reports whether holder is the maintainer.
	Elect(ctx context.Context, queue, holder string, term time.Duration) (bool, error)
	// Resign ends holder's term as the maintainer of queue, if it has it.
	Resign(ctx context.Context, queue, holder string) error

	// WatchDue starts watching queue for what comes due before the plan
	// of the last Forward: the channel receives when Forward should run
	// now, and once when the watch takes effect (again on each
	// resubscription). stop ends the watch. A nil channel means that the
	// store cannot tell: the caller polls.
	WatchDue(ctx context.Context, queue string) (notices <-chan struct{}, stop func())
	// Forward moves queue's due scheduled and retry tasks to pending, a
	// batch at a time, and wakes the workers of due aggregation groups
	// and batches. With most > 0 it plans the caller's next run, at most
	// most from now, for WatchDue to move sooner.
	Forward(ctx context.Context, queue string, most time.Duration) (store.Forwarded, error)

	// Recover returns a batch of queue's tasks whose lease expired to
	// pending, or archives those recovered too often, and reports the ids
	// of both and whether the batch was full.
	Recover(ctx context.Context, queue string) (recovered, archived []string, more bool, err error)
	// Unroute puts back on queue's pending list the rerouted tasks of
	// names no worker alive announces any more, and returns how many.
	Unroute(ctx context.Context, queue string) (int64, error)

	// QueueInfo returns the sizes of queue.
	QueueInfo(ctx context.Context, queue string) (*store.QueueInfo, error)
}
