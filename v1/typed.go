package machinery

import (
	"context"

	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/tasks"
)

// Arg is the set of Go types a task's argument may have: those of
// tasks.ArgOf, exactly (a named type is not one of them, as it would
// arrive as its underlying type).
type Arg interface {
	bool | int | int8 | int16 | int32 | int64 |
		uint | uint8 | uint16 | uint32 | uint64 |
		float32 | float64 | string |
		[]bool | []int | []int8 | []int16 | []int32 | []int64 |
		[]uint | []uint8 | []uint16 | []uint32 | []uint64 |
		[]float32 | []float64 | []string
}

// typedTask is the name and function of a typed task (Task0 … Task3).
type typedTask[R any] struct {
	name string
	fn   any
}

// Name is the task's name.
func (t typedTask[R]) Name() string { return t.name }

// Registrable is a typed task, for Server.Register.
type Registrable interface {
	Name() string
	taskFunc() any
}

func (t typedTask[R]) taskFunc() any { return t.fn }

// send sends the task with args (each of a type Arg lists).
func (t typedTask[R]) send(ctx context.Context, s *Server, args ...any) (*TypedResult[R], error) {
	sig, err := tasks.NewSignatureOf(t.name, args...)
	if err != nil {
		return nil, err
	}
	r, err := s.SendTaskWithContext(ctx, sig)
	if err != nil {
		return nil, err
	}
	return &TypedResult[R]{AsyncResult: r}, nil
}

// Register registers typed tasks (NewTask0 … NewTask3) under their
// names, as RegisterTask does.
func (s *Server) Register(ts ...Registrable) error {
	for _, t := range ts {
		if err := s.RegisterTask(t.Name(), t.taskFunc()); err != nil {
			return err
		}
	}
	return nil
}

// TypedResult is the result of a typed task: Get returns its result as an R.
type TypedResult[R any] struct {
	*result.AsyncResult
}

// Get waits until ctx ends for the task's result (result.Get1).
func (r *TypedResult[R]) Get(ctx context.Context) (R, error) {
	return result.Get1[R](ctx, r.AsyncResult)
}

// Task0 … Task3 are typed tasks: a task function with its name, whose arguments and
// result the compiler checks where it is sent and where its result is
// read, beside machinery's untyped RegisterTask and SendTask:
//
//	var Resize = machinery.NewTask3("resize",
//		func(ctx context.Context, id string, width int, crop bool) (string, error) { … })
//
//	server.Register(Resize)
//	res, err := Resize.Send(ctx, server, "img-1", 640, true)
//	url, err := res.Get(ctx) // a string
//
// Its arguments are of the types Arg lists; its one result is any type a
// task may return (a struct goes as JSON). NewTask0 to NewTask3 take
// functions of 0 to 3 arguments after the context.
//
// Task0 is a typed task without arguments.
type Task0[R any] struct{ typedTask[R] }

// NewTask0 makes the typed task name of fn.
func NewTask0[R any](name string, fn func(context.Context) (R, error)) *Task0[R] {
	return &Task0[R]{typedTask[R]{name: name, fn: fn}}
}

// Send sends the task with s.
func (t *Task0[R]) Send(ctx context.Context, s *Server) (*TypedResult[R], error) {
	return t.send(ctx, s)
}

// Task1 is a typed task of one argument.
type Task1[A Arg, R any] struct{ typedTask[R] }

// NewTask1 makes the typed task name of fn.
func NewTask1[A Arg, R any](name string, fn func(context.Context, A) (R, error)) *Task1[A, R] {
	return &Task1[A, R]{typedTask[R]{name: name, fn: fn}}
}

// Send sends the task with s, with a.
func (t *Task1[A, R]) Send(ctx context.Context, s *Server, a A) (*TypedResult[R], error) {
	return t.send(ctx, s, a)
}

// Task2 is a typed task of two arguments.
type Task2[A, B Arg, R any] struct{ typedTask[R] }

// NewTask2 makes the typed task name of fn.
func NewTask2[A, B Arg, R any](name string, fn func(context.Context, A, B) (R, error)) *Task2[A, B, R] {
	return &Task2[A, B, R]{typedTask[R]{name: name, fn: fn}}
}

// Send sends the task with s, with a and b.
func (t *Task2[A, B, R]) Send(ctx context.Context, s *Server, a A, b B) (*TypedResult[R], error) {
	return t.send(ctx, s, a, b)
}

// Task3 is a typed task of three arguments.
type Task3[A, B, C Arg, R any] struct{ typedTask[R] }

// NewTask3 makes the typed task name of fn.
func NewTask3[A, B, C Arg, R any](name string, fn func(context.Context, A, B, C) (R, error)) *Task3[A, B, C, R] {
	return &Task3[A, B, C, R]{typedTask[R]{name: name, fn: fn}}
}

// Send sends the task with s, with a, b and c.
func (t *Task3[A, B, C, R]) Send(ctx context.Context, s *Server, a A, b B, c C) (*TypedResult[R], error) {
	return t.send(ctx, s, a, b, c)
}
