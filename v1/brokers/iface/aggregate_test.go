package iface

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
