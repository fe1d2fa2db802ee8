package maintenance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/service"
)

// Stop ends the loop and its watch, and a maintainer resigns, with a
// context of its own, so that another process takes over at its next
// election rather than at the term's end.
func TestStopResignsWhenMaintaining(t *testing.T) {
	t.Parallel()
	for _, won := range []bool{true, false} {
		name := "maintaining"
		if !won {
			name = "not maintaining"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newFakeStore(true)
			s.won = won
			e := run(t, s, p(300*time.Millisecond, time.Hour))

			e.waitArmed(3)
			e.m.Stop()
			e.m.Stop()
			if err := e.m.Start(context.Background()); !errors.Is(err, service.ErrStopped) {
				t.Errorf("Start after Stop = %v, want ErrStopped", err)
			}
			if n := e.clk.Armed(); n != 0 {
				t.Errorf("%d timers armed after Stop, want 0", n)
			}
			resigned := s.called("Resign")
			if !won {
				if len(resigned) != 0 {
					t.Errorf("resigned %d times without having won, want 0", len(resigned))
				}
				return
			}
			if len(resigned) != 1 || resigned[0].holder != holder {
				t.Fatalf("resigned %+v, want once, as %q", resigned, holder)
			}
			if r := resigned[0]; r.ctxErr != nil || !r.hasDeadline {
				t.Errorf("resigned with a context done (%v) or without a deadline (%t)", r.ctxErr, r.hasDeadline)
			}
			if n := len(s.called("unwatch")); n != 1 {
				t.Errorf("ended the watch %d times, want 1", n)
			}
		})
	}
}
