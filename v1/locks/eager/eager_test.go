package eager_test

import (
	"errors"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/locks/eager"
)

func TestLockHoldsUntilItsTime(t *testing.T) {
	l := eager.New()
	until := time.Now().Add(time.Hour).UnixNano()
	if err := l.Lock("k", until); err != nil {
		t.Fatal(err)
	}
	if err := l.Lock("k", until); !errors.Is(err, eager.ErrEagerLockFailed) {
		t.Fatalf("second Lock of a held key: %v, want ErrEagerLockFailed", err)
	}
	if err := l.LockWithRetries("other", until); err != nil {
		t.Fatalf("LockWithRetries of a free key: %v", err)
	}
	// A lock whose time has passed can be taken again.
	if err := l.Lock("past", time.Now().Add(-time.Second).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if err := l.Lock("past", until); err != nil {
		t.Fatalf("Lock of a key whose time has passed: %v", err)
	}
}
