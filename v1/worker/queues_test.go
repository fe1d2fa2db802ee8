package worker

import (
	"reflect"
	"testing"
)

func TestQueueOrderStrict(t *testing.T) {
	t.Parallel()
	o := newQueueOrder([]string{"low", "high", "mid"}, []int{1, 9, 5}, true)
	for i := 0; i < 5; i++ {
		if got := o.next(); !reflect.DeepEqual(got, []string{"high", "mid", "low"}) {
			t.Fatalf("strict order %v", got)
		}
	}
}

func TestQueueOrderWeighted(t *testing.T) {
	t.Parallel()
	o := newQueueOrder([]string{"a", "b"}, []int{3, 1}, false)
	first := map[string]int{}
	const n = 20000
	for i := 0; i < n; i++ {
		order := o.next()
		if len(order) != 2 || order[0] == order[1] {
			t.Fatalf("order %v is not a permutation", order)
		}
		first[order[0]]++
	}
	// Expect a first 75% of the time; 20000 draws put 0.70-0.80 about 16
	// standard deviations wide.
	if share := float64(first["a"]) / n; share < 0.70 || share > 0.80 {
		t.Fatalf("a came first %.3f of the time, want about 0.75", share)
	}
}
