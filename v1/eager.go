package machinery

import (
	"context"
	"time"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Eager mode is machinery's synchronous mode, selected with Broker "eager":
// the Server runs each task it sends in the sending goroutine, through a
// worker's Process, so by the time SendTask returns the task's state is
// final. Nothing is queued (the Server's broker is an idle in-process one,
// so workers started on an eager Server wait); a task with an ETA, or a
// retry, makes the send wait until then: it never runs early.

// runEagerly runs each of sigs in turn, waiting for its ETA first.
func (s *Server) runEagerly(ctx context.Context, sigs ...*tasks.Signature) error {
	for i, sig := range sigs {
		sig = tasks.CopySignature(sig)
		if sig.ETA != nil {
			if wait := time.Until(*sig.ETA); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					if i > 0 { // those before it ran
						return store.MaybeSent(ctx.Err())
					}
					return store.NotSent(ctx.Err())
				}
			}
		}
		if err := s.eager.Process(ctx, sig); err != nil {
			return err
		}
	}
	return nil
}
