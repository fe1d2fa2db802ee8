// Package main must not compile: a typed task's parameter is of a type a
// task argument cannot have (TestTypedTaskRefusesOtherArgTypes).
package main

import (
	"context"

	machinery "github.com/b6192125/machinist/v1"
)

type point struct{ X, Y int }

var _ = machinery.NewTask1("plot", func(ctx context.Context, p point) (string, error) { return "", nil })

func main() {}
