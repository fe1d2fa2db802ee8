package tasks

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// typeNames are the Arg.Type of each supported Go type: []byte and
// []uint8 are one Go type, named "[]byte".
var typeNames = func() map[reflect.Type]string {
	m := make(map[reflect.Type]string, len(typesMap))
	for name, t := range typesMap {
		if name != "[]uint8" {
			m[t] = name
		}
	}
	return m
}()

// ArgOf returns the Arg that carries v, its Type named after v's Go type:
// one of the 29 a task function's parameters may have (bool, the sized and
// unsized integers, float32, float64, string, and slices of each; []byte).
// A value of any other type, a named type whose underlying type is one of
// them included, is an error wrapping ErrArgs that names its type.
func ArgOf(v any) (Arg, error) {
	name, ok := typeNames[reflect.TypeOf(v)]
	if !ok {
		return Arg{}, fmt.Errorf("%w: a %T cannot be an argument (want one of %s)", ErrArgs, v, supportedTypes())
	}
	return Arg{Type: name, Value: v}, nil
}

// NewSignatureOf returns a signature of the task name with args, each
// Arg's Type taken from the Go value (ArgOf), so that
//
//	sig, err := tasks.NewSignatureOf("resize", imageID, 640, true)
//
// is NewSignature("resize", []Arg{{Type: "string", Value: imageID},
// {Type: "int", Value: 640}, {Type: "bool", Value: true}}). A value the
// task's parameters cannot take is refused, naming its position and type.
func NewSignatureOf(name string, args ...any) (*Signature, error) {
	out := make([]Arg, len(args))
	for i, v := range args {
		a, err := ArgOf(v)
		if err != nil {
			return nil, fmt.Errorf("tasks: signature of %q: argument %d: %w", name, i, err)
		}
		out[i] = a
	}
	return NewSignature(name, out)
}

// supportedTypes lists the names of the supported argument types.
func supportedTypes() string {
	names := make([]string, 0, len(typeNames))
	for _, n := range typeNames {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
