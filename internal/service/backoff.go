package service

import (
	"math/rand/v2"
	"time"
)

// Backoff computes the delays before retrying after consecutive failures:
// Min after the first, doubling after each further one, up to Max, each
// shortened by a random fraction of up to Jitter so that processes that
// failed together do not retry together. The zero Backoff uses the
// defaults.
type Backoff struct {
	// Min is the delay after the first failure. Default 1s.
	Min time.Duration
	// Max caps the delay. Default 1m; a Max below Min is Min.
	Max time.Duration
	// Jitter is the largest fraction of a delay taken off at random: a
	// delay d becomes one in [d*(1-Jitter), d]. Default (0) 0.2; values
	// above 1 are 1; a negative Jitter means none.
	Jitter float64
}

// The Backoff defaults.
const (
	DefaultBackoffMin    = time.Second
	DefaultBackoffMax    = time.Minute
	DefaultBackoffJitter = 0.2
)

// Delay returns the delay after the n-th consecutive failure (n >= 1; a
// smaller n counts as 1). It never exceeds Max, nor goes below
// Min*(1-Jitter).
func (b Backoff) Delay(n int) time.Duration {
	lo, hi, jitter := b.Min, b.Max, b.Jitter
	if lo <= 0 {
		lo = DefaultBackoffMin
	}
	if hi <= 0 {
		hi = DefaultBackoffMax
	}
	hi = max(hi, lo)
	switch {
	case jitter == 0:
		jitter = DefaultBackoffJitter
	case jitter < 0:
		jitter = 0
	case jitter > 1:
		jitter = 1
	}

	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2 // no overflow: d < hi before doubling
		if d <= 0 {
			d = hi
		}
	}
	d = min(d, hi)
	if j := time.Duration(float64(d) * jitter); j > 0 {
		d -= rand.N(j + 1)
	}
	return d
}
