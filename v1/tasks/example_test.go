package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/b6192125/machinist/v1/tasks"
)

func ExampleNewChain() {
	add := &tasks.Signature{Name: "add", Args: []tasks.Arg{
		{Type: "int64", Value: 1},
		{Type: "int64", Value: 2},
	}}
	multiply := &tasks.Signature{Name: "multiply", Args: []tasks.Arg{
		{Type: "int64", Value: 10},
	}}
	chain, err := tasks.NewChain(add, multiply)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The chain is its first task: multiply runs when add succeeded, with
	// add's result appended to its args.
	first := chain.Tasks[0]
	fmt.Println(first.Name, "then", first.OnSuccess[0].Name)
	fmt.Println(strings.HasPrefix(first.UUID, "task_"))
	// Output:
	// add then multiply
	// true
}

func ExampleReflectValue() {
	// Numbers in a decoded message are json.Numbers, slices are
	// []interface{} and []byte is base64.
	var args []tasks.Arg
	dec := json.NewDecoder(strings.NewReader(`[
		{"Type": "int64", "Value": 9007199254740993},
		{"Type": "[]float32", "Value": [0.5, 2]},
		{"Type": "[]byte", "Value": "aGkh"},
		{"Type": "int8", "Value": 300}
	]`))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		fmt.Println(err)
		return
	}
	for _, arg := range args {
		v, err := tasks.ReflectValue(arg.Type, arg.Value)
		if err != nil {
			fmt.Println(errors.Is(err, tasks.ErrArgs), err)
			continue
		}
		fmt.Printf("%T %v\n", v.Interface(), v.Interface())
	}
	// Output:
	// int64 9007199254740993
	// []float32 [0.5 2]
	// []uint8 [104 105 33]
	// true tasks: arguments do not fit the task function: 300 is not int8: it overflows int8
}

func ExampleTask_Call() {
	add := func(ctx context.Context, a, b int) (int, error) {
		fmt.Println("running", tasks.SignatureFromContext(ctx).Name)
		return a + b, nil
	}
	sig := &tasks.Signature{Name: "add", Args: []tasks.Arg{
		{Type: "int64", Value: 40}, // int64 args fit int parameters when the value does
		{Type: "int64", Value: 2},
	}}
	task, err := tasks.NewWithContext(context.Background(), add, sig)
	if err != nil {
		fmt.Println(err)
		return
	}
	results, err := task.Call()
	if err != nil {
		fmt.Println(err)
		return
	}
	values, err := tasks.ReflectTaskResults(results)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(results[0].Type, tasks.HumanReadableResults(values))

	// Args that do not fit are refused before the function runs.
	sig.Args[1] = tasks.Arg{Type: "string", Value: "2"}
	_, err = tasks.NewWithContext(context.Background(), add, sig)
	fmt.Println(err)
	// Output:
	// running add
	// int 42
	// tasks: arguments do not fit the task function: arg 1 (Type "string") cannot be used as int
}

func ExamplePanicError() {
	task, err := tasks.New(func() error { panic(errors.New("oops")) }, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = task.Call()
	var pe *tasks.PanicError
	fmt.Println(err, errors.As(err, &pe), len(pe.Stack) > 0)
	// Output:
	// oops true true
}
