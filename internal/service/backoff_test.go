package service_test

import (
	"math"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/service"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	noJitter := func(b service.Backoff) service.Backoff { b.Jitter = -1; return b }
	tests := []struct {
		name    string
		backoff service.Backoff
		want    []time.Duration // for n = 1, 2, ...
	}{
		{"doubles up to Max", noJitter(service.Backoff{Min: time.Second, Max: 10 * time.Second}),
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}},
		{"defaults", noJitter(service.Backoff{}),
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}},
		{"Max below Min is Min", noJitter(service.Backoff{Min: time.Minute, Max: time.Second}),
			[]time.Duration{time.Minute, time.Minute}},
		{"Min only, under the default Max", noJitter(service.Backoff{Min: 20 * time.Second}),
			[]time.Duration{20 * time.Second, 40 * time.Second, time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, want := range tt.want {
				if got := tt.backoff.Delay(i + 1); got != want {
					t.Errorf("Delay(%d) = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

func TestBackoffDelayEdges(t *testing.T) {
	t.Parallel()
	b := service.Backoff{Min: time.Second, Max: math.MaxInt64, Jitter: -1}
	if got := b.Delay(0); got != time.Second {
		t.Errorf("Delay(0) = %v, want Min", got)
	}
	if got := b.Delay(-5); got != time.Second {
		t.Errorf("Delay(-5) = %v, want Min", got)
	}
	// No overflow on the way to a huge Max.
	for _, n := range []int{62, 63, 64, 100, math.MaxInt} {
		if got := b.Delay(n); got <= 0 || got > math.MaxInt64 {
			t.Errorf("Delay(%d) = %v, want a positive delay", n, got)
		}
	}
	if got := b.Delay(math.MaxInt); got != math.MaxInt64 {
		t.Errorf("Delay(MaxInt) = %v, want Max", got)
	}
}

func TestBackoffJitter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		jitter float64
		lo, hi time.Duration // bounds of Delay(1) with Min 10s
	}{
		{"default 0.2", 0, 8 * time.Second, 10 * time.Second},
		{"half", 0.5, 5 * time.Second, 10 * time.Second},
		{"above 1 is 1", 7, 0, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := service.Backoff{Min: 10 * time.Second, Max: time.Hour, Jitter: tt.jitter}
			seen := map[time.Duration]bool{}
			for range 1000 {
				d := b.Delay(1)
				if d < tt.lo || d > tt.hi {
					t.Fatalf("Delay(1) = %v, want within [%v, %v]", d, tt.lo, tt.hi)
				}
				seen[d] = true
			}
			// Nanosecond resolution over seconds: 1000 draws that are not
			// all different mean no randomness.
			if len(seen) < 990 {
				t.Errorf("%d distinct delays in 1000 draws: not jittered", len(seen))
			}
		})
	}
}
