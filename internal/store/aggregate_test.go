package store

import (
	"strings"
	"testing"
	"time"
)

func TestAggregationPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		p   AggregationPolicy
		bad string
	}{
		{p: AggregationPolicy{MaxSize: 100}},
		{p: AggregationPolicy{MaxDelay: time.Second}},
		{p: AggregationPolicy{GracePeriod: time.Second}},
		{p: AggregationPolicy{MaxSize: 10, MaxDelay: time.Minute, GracePeriod: time.Second}},
		{p: AggregationPolicy{}, bad: "at least one"},
		{p: AggregationPolicy{MaxSize: -1}, bad: "negative"},
		{p: AggregationPolicy{MaxSize: 5, GracePeriod: -time.Second}, bad: "negative"},
		{p: AggregationPolicy{MaxSize: 1}, bad: "MaxSize 1"},
	} {
		err := tc.p.Validate()
		if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.p, err, tc.bad)
		}
	}
}

func TestAggregationPolicyDueAt(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	oldest, newest, full := t0, t0.Add(4*time.Second), t0.Add(3*time.Second)
	for _, c := range []struct {
		p    AggregationPolicy
		full time.Time
		want time.Time
	}{
		{AggregationPolicy{MaxSize: 5}, full, full},
		{AggregationPolicy{MaxSize: 5}, time.Time{}, time.Time{}}, // not full: never by size
		{AggregationPolicy{MaxDelay: 10 * time.Second}, time.Time{}, t0.Add(10 * time.Second)},
		{AggregationPolicy{GracePeriod: time.Second}, time.Time{}, t0.Add(5 * time.Second)},
		{AggregationPolicy{MaxSize: 5, MaxDelay: 10 * time.Second, GracePeriod: time.Second}, full, full},
		{AggregationPolicy{MaxDelay: 2 * time.Second, GracePeriod: time.Second}, time.Time{}, t0.Add(2 * time.Second)},
		{AggregationPolicy{}, full, time.Time{}},
	} {
		if got := c.p.DueAt(c.full, oldest, newest); !got.Equal(c.want) {
			t.Errorf("%+v with full %v: due %v, want %v", c.p, c.full, got, c.want)
		}
	}
}
