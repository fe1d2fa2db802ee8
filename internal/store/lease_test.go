package store_test

import (
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// A lease past its expiry is not valid, whether or not its timer has fired
// (a process paused past the expiry wakes before its timers run).
func TestLeaseInvalidAfterExpiryByTheClock(t *testing.T) {
	for i := 0; i < 1000; i++ {
		l := store.NewLease("t", time.Now().Add(-time.Second))
		if l.Valid() {
			t.Fatalf("lease expired a second ago: Valid() = true (try %d)", i)
		}
		select {
		case <-l.Done():
		default:
			t.Fatal("lease found expired by Valid: Done not closed")
		}
	}
	fresh := store.NewLease("t", time.Now().Add(time.Hour))
	if !fresh.Valid() {
		t.Fatal("lease expiring in an hour: Valid() = false")
	}
	fresh.Release()
	if !fresh.Valid() {
		t.Fatal("released lease: Valid() = false, want true (settled while held)")
	}
	fresh.Lose()
}
