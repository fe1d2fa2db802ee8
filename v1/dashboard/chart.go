package dashboard

import (
	"fmt"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// chart is a throughput chart drawn as SVG bars: per bucket of time, the
// tasks that succeeded (stacked) on those that failed.
type chart struct {
	Width, Height float64
	Bars          []bar
	// Max is the largest bucket's count, the top of the scale; Empty
	// says no task finished in the window.
	Max   int
	Empty bool
	// Bucket is the length of time one bar counts.
	Bucket time.Duration
	// Processed and Failed are the totals over the window.
	Processed, Failed int
}

// bar is one bucket of a chart, in SVG coordinates (y grows downwards):
// the tasks that succeeded, OKH high from OKY, stand on those that
// failed, BadH high from BadY.
type bar struct {
	X, W       float64
	OKY, OKH   float64 // the part that succeeded
	BadY, BadH float64 // the part that failed, below it
	Title      string
}

// newChart draws periods (oldest first) as n bars in a width × height
// box, each bar summing len(periods)/n consecutive periods.
func newChart(periods []brokers.StatCount, n int, width, height float64) chart {
	c := chart{Width: width, Height: height, Empty: true}
	if len(periods) == 0 || n < 1 {
		return c
	}
	n = min(n, len(periods))
	type sum struct {
		from, to     time.Time
		done, failed int
	}
	sums := make([]sum, n)
	for i, p := range periods {
		b := &sums[i*n/len(periods)]
		if b.from.IsZero() {
			b.from = p.At
		}
		b.to = p.At.Add(brokers.StatsPeriod)
		b.done += p.Processed
		b.failed += p.Failed
		c.Processed += p.Processed
		c.Failed += p.Failed
	}
	c.Bucket = brokers.StatsPeriod * time.Duration(len(periods)/n)
	for _, s := range sums {
		c.Max = max(c.Max, s.done)
	}
	if c.Max == 0 {
		return c
	}
	c.Empty = false
	w := width / float64(n)
	gap := 0.0
	if w >= 3 {
		gap = 1
	}
	for i, s := range sums {
		if s.done == 0 {
			continue
		}
		failed := min(s.failed, s.done)
		total := height * float64(s.done) / float64(c.Max)
		bad := height * float64(failed) / float64(c.Max)
		c.Bars = append(c.Bars, bar{
			X: float64(i) * w, W: w - gap,
			OKY: height - total, OKH: total - bad,
			BadY: height - bad, BadH: bad,
			Title: fmt.Sprintf("%s–%s: %d processed, %d failed",
				s.from.UTC().Format("15:04:05"), s.to.UTC().Format("15:04:05 UTC"), s.done, failed),
		})
	}
	return c
}
