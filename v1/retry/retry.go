// Package retry is machinery v1's retry package: Fibonacci backoff
// helpers with machinery's signatures. machinist's own retry delays
// (RetryTimeout, ErrRetryTaskLater) are computed by the worker, capped at
// worker.MaxRetryDelay; its brokers back off on their own and do not call
// Closure.
package retry

import (
	"math"
	"time"
)

// Fibonacci returns a function that yields 1, 1, 2, 3, 5, … on successive
// calls, stopping at math.MaxInt rather than overflowing.
func Fibonacci() func() int {
	a, b := 0, 1
	return func() int {
		out := b
		if a > math.MaxInt-b {
			b = math.MaxInt
		} else {
			a, b = b, a+b
		}
		return out
	}
}

// FibonacciNext returns the first Fibonacci number greater than start
// (1 for a start below 1), or math.MaxInt when there is none: at most 92
// steps, whatever start is.
func FibonacciNext(start int) int {
	a, b := 1, 1
	for b <= start {
		if a > math.MaxInt-b {
			return math.MaxInt
		}
		a, b = b, a+b
	}
	return b
}

// Closure returns machinery's reconnect backoff: each call of the function
// it returns sleeps for the next Fibonacci number of seconds (1, 1, 2, 3,
// 5, …), or until a value arrives on stop. It is a variable, as in
// machinery, so that a program can replace it.
var Closure = func() func(stop chan int) {
	next := Fibonacci()
	return func(stop chan int) {
		t := time.NewTimer(time.Duration(next()) * time.Second)
		defer t.Stop()
		select {
		case <-stop:
		case <-t.C:
		}
	}
}
