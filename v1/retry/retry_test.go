package retry_test

import (
	"math"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/retry"
)

func TestFibonacci(t *testing.T) {
	fib := retry.Fibonacci()
	want := []int{1, 1, 2, 3, 5, 8, 13, 21}
	for i, w := range want {
		if got := fib(); got != w {
			t.Fatalf("call %d: %d, want %d", i+1, got, w)
		}
	}
	for range 200 { // far past the largest int Fibonacci number
		if got := fib(); got <= 0 {
			t.Fatalf("Fibonacci overflowed to %d", got)
		}
	}
}

func TestFibonacciNext(t *testing.T) {
	for _, tc := range []struct{ start, want int }{
		{-5, 1}, {0, 1}, {1, 2}, {2, 3}, {3, 5}, {4, 5}, {5, 8}, {6, 8}, {100, 144},
		{math.MaxInt - 1, math.MaxInt}, {math.MaxInt, math.MaxInt},
	} {
		if got := retry.FibonacciNext(tc.start); got != tc.want {
			t.Errorf("FibonacciNext(%d) = %d, want %d", tc.start, got, tc.want)
		}
	}
}

func TestClosureStopsWhenSignalled(t *testing.T) {
	wait := retry.Closure()
	stop := make(chan int, 1)
	stop <- 1
	done := make(chan struct{})
	go func() {
		wait(stop) // would sleep 1 s; the stop signal is already there
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(500 * time.Millisecond):
		t.Fatal("the backoff did not return on its stop signal")
	}
}
