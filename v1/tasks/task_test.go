package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func add(a, b int64) (int64, error) { return a + b, nil }

func sum(xs ...int64) (int64, error) {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s, nil
}

func TestNewCallsWithConvertedArgs(t *testing.T) {
	t.Parallel()
	type celsius float64
	tests := []struct {
		name string
		fn   interface{}
		args []Arg
		want []*TaskResult
	}{
		{
			name: "Go ints with Type int64",
			fn:   add,
			args: []Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}},
			want: []*TaskResult{{Type: "int64", Value: int64(3)}},
		},
		{
			name: "json.Numbers",
			fn:   add,
			args: []Arg{{Type: "int64", Value: json.Number("40")}, {Type: "int64", Value: json.Number("2")}},
			want: []*TaskResult{{Type: "int64", Value: int64(42)}},
		},
		{
			name: "Type int64 into an int parameter",
			fn:   func(a int, b int8) (int, error) { return a + int(b), nil },
			args: []Arg{{Type: "int64", Value: 5}, {Type: "int64", Value: json.Number("-3")}},
			want: []*TaskResult{{Type: "int", Value: 2}},
		},
		{
			name: "Type float64 into a named float parameter",
			fn:   func(c celsius) (float64, error) { return float64(c) * 2, nil },
			args: []Arg{{Type: "float64", Value: 1.25}},
			want: []*TaskResult{{Type: "float64", Value: 2.5}},
		},
		{
			name: "Type int64 into a time.Duration parameter",
			fn:   func(d time.Duration) (string, error) { return d.String(), nil },
			args: []Arg{{Type: "int64", Value: int64(time.Second)}},
			want: []*TaskResult{{Type: "string", Value: "1s"}},
		},
		{
			name: "[]int64 into a []int parameter",
			fn:   func(xs []int) (int, error) { return len(xs) + xs[0], nil },
			args: []Arg{{Type: "[]int64", Value: []interface{}{json.Number("10"), json.Number("20")}}},
			want: []*TaskResult{{Type: "int", Value: 12}},
		},
		{
			name: "empty Type takes the parameter's type",
			fn:   func(s string, xs []uint16) (string, error) { return fmt.Sprint(s, xs), nil },
			args: []Arg{{Value: "a"}, {Value: []interface{}{json.Number("7")}}},
			want: []*TaskResult{{Type: "string", Value: "a[7]"}},
		},
		{
			name: "interface{} parameter takes the converted value",
			fn:   func(v interface{}) (string, error) { return fmt.Sprintf("%T", v), nil },
			args: []Arg{{Type: "uint8", Value: json.Number("1")}},
			want: []*TaskResult{{Type: "string", Value: "uint8"}},
		},
		{
			name: "several results",
			fn:   func() (int64, string, []byte, bool, error) { return 1, "a", []byte("b"), true, nil },
			want: []*TaskResult{{"int64", int64(1)}, {"string", "a"}, {"[]uint8", []byte("b")}, {"bool", true}},
		},
		{
			name: "variadic with no args",
			fn:   sum,
			want: []*TaskResult{{Type: "int64", Value: int64(0)}},
		},
		{
			name: "variadic with several args",
			fn:   sum,
			args: []Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: json.Number("2")}, {Type: "int", Value: 3}},
			want: []*TaskResult{{Type: "int64", Value: int64(6)}},
		},
		{
			name: "fixed and variadic parameters",
			fn: func(prefix string, xs ...int) (string, error) {
				return fmt.Sprint(prefix, xs), nil
			},
			args: []Arg{{Type: "string", Value: "p"}, {Type: "int64", Value: 1}},
			want: []*TaskResult{{Type: "string", Value: "p[1]"}},
		},
		{
			name: "context and variadic",
			fn: func(ctx context.Context, xs ...int64) (int, error) {
				return len(xs), ctx.Err()
			},
			args: []Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}},
			want: []*TaskResult{{Type: "int", Value: 2}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := New(tc.fn, tc.args)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got, err := task.Call()
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Call = %s, want %s", formatResults(got), formatResults(tc.want))
			}
		})
	}
}

func formatResults(results []*TaskResult) string {
	parts := make([]string, len(results))
	for i, r := range results {
		parts[i] = fmt.Sprintf("{%q %#v}", r.Type, r.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestNewRejectsArgsThatDoNotFit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   interface{}
		args []Arg
		msg  string
	}{
		{
			name: "too many args",
			fn:   add,
			args: []Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}, {Type: "int64", Value: 3}},
			msg:  "tasks: arguments do not fit the task function: got 3 args, the function takes 2",
		},
		{
			name: "too few args",
			fn:   add,
			args: []Arg{{Type: "int64", Value: 1}},
			msg:  "tasks: arguments do not fit the task function: got 1 args, the function takes 2",
		},
		{
			name: "the context is not counted",
			fn:   func(context.Context, int64) error { return nil },
			args: nil,
			msg:  "tasks: arguments do not fit the task function: got 0 args, the function takes 1",
		},
		{
			name: "too few for the fixed parameters of a variadic function",
			fn:   func(string, ...int) error { return nil },
			args: nil,
			msg:  "tasks: arguments do not fit the task function: got 0 args, the function takes at least 1",
		},
		{
			name: "string Type for an int parameter",
			fn:   func(int, int) error { return nil },
			args: []Arg{{Type: "int", Value: 1}, {Type: "string", Value: "a"}},
			msg:  `tasks: arguments do not fit the task function: arg 1 (Type "string") cannot be used as int`,
		},
		{
			name: "int64 Type for a string parameter",
			fn:   func(string) error { return nil },
			args: []Arg{{Type: "int64", Value: 1}},
			msg:  `tasks: arguments do not fit the task function: arg 0 (Type "int64") cannot be used as string`,
		},
		{
			name: "a value that does not fit the parameter",
			fn:   func(int8) error { return nil },
			args: []Arg{{Type: "int64", Value: 300}},
			msg:  `tasks: arguments do not fit the task function: arg 0 (Type "int64") cannot be used as int8: 300 is not int8: it overflows int8`,
		},
		{
			name: "a float with a fraction for an int parameter",
			fn:   func(int) error { return nil },
			args: []Arg{{Type: "float64", Value: 1.5}},
			msg:  `arg 0 (Type "float64") cannot be used as int: 1.5 is not int: it is not an integer`,
		},
		{
			name: "a value that is not of its Type",
			fn:   add,
			args: []Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: "2"}},
			msg:  `tasks: arguments do not fit the task function: arg 1 (Type "int64"): "2" is not int64: it is of type string`,
		},
		{
			name: "a slice element that does not fit",
			fn:   func([]int8) error { return nil },
			args: []Arg{{Type: "[]int64", Value: []int64{1, 1000}}},
			msg:  `arg 0 (Type "[]int64") cannot be used as []int8: [1 1000] is not []int8: element 1: 1000 is not int8: it overflows int8`,
		},
		{
			name: "a slice for a scalar parameter",
			fn:   func(int) error { return nil },
			args: []Arg{{Type: "[]int", Value: []int{1}}},
			msg:  `arg 0 (Type "[]int") cannot be used as int`,
		},
		{
			name: "a variadic arg of the wrong type",
			fn:   sum,
			args: []Arg{{Type: "int64", Value: 1}, {Type: "bool", Value: true}},
			msg:  `arg 1 (Type "bool") cannot be used as int64`,
		},
		{
			name: "empty Type for an unsupported parameter type",
			fn:   func(map[string]int) error { return nil },
			args: []Arg{{Value: map[string]interface{}{}}},
			msg:  `arg 0 (Type "") cannot be used as map[string]int`,
		},
		{
			name: "a number for a bool parameter",
			fn:   func(bool) error { return nil },
			args: []Arg{{Type: "int", Value: 1}},
			msg:  `arg 0 (Type "int") cannot be used as bool`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := New(tc.fn, tc.args)
			if task != nil {
				t.Errorf("New returned a task along with error %v", err)
			}
			checkArgsError(t, err, tc.msg)
		})
	}
}

func TestNewRejectsUnsupportedArgType(t *testing.T) {
	t.Parallel()
	_, err := New(func(interface{}) error { return nil }, []Arg{{Type: "time.Time", Value: "2020-01-01T00:00:00Z"}})
	checkArgsError(t, err, `arg 0 (Type "time.Time"): time.Time is not one of supported types`)
	var unsupported ErrUnsupportedType
	if !errors.As(err, &unsupported) {
		t.Errorf("error %q does not wrap an ErrUnsupportedType", err)
	}
}

func TestReflectArgsLeavesTaskUnchangedOnError(t *testing.T) {
	t.Parallel()
	task, err := New(add, []Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}})
	if err != nil {
		t.Fatal(err)
	}
	err = task.ReflectArgs([]Arg{{Type: "int64", Value: 1}, {Type: "string", Value: "x"}})
	checkArgsError(t, err, "arg 1")
	results, err := task.Call()
	if err != nil {
		t.Fatal(err)
	}
	if got := results[0].Value; got != int64(3) {
		t.Errorf("after a failed ReflectArgs, Call = %v, want the old args' 3", got)
	}

	if err := (&Task{}).ReflectArgs(nil); !errors.Is(err, ErrTaskMustBeFunc) {
		t.Errorf("ReflectArgs on a Task without a function = %v, want ErrTaskMustBeFunc", err)
	}
}

func TestNewValidatesTheFunctionFirst(t *testing.T) {
	t.Parallel()
	if _, err := New(func() {}, []Arg{{Type: "nonsense"}}); !errors.Is(err, ErrTaskReturnsNoValue) {
		t.Errorf("New = %v, want ErrTaskReturnsNoValue", err)
	}
	if _, err := NewWithSignature("not a func", &Signature{Name: "x"}); !errors.Is(err, ErrTaskMustBeFunc) {
		t.Errorf("NewWithSignature = %v, want ErrTaskMustBeFunc", err)
	}
	if _, err := NewWithContext(context.Background(), add, nil); !errors.Is(err, ErrNilSignature) {
		t.Errorf("NewWithContext with a nil signature = %v, want ErrNilSignature", err)
	}
}

type ctxKey struct{}

func TestContextParameter(t *testing.T) {
	t.Parallel()

	sig := &Signature{UUID: "task_1", Name: "ctxTask", Args: []Arg{{Type: "string", Value: "x"}}}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "v"), time.Hour)
	defer cancel()

	var (
		gotCtx context.Context
		gotArg string
	)
	fn := func(ctx context.Context, s string) error {
		gotCtx, gotArg = ctx, s
		return nil
	}
	task, err := NewWithContext(ctx, fn, sig)
	if err != nil {
		t.Fatal(err)
	}
	if !task.UseContext {
		t.Error("UseContext is false for a function taking a context")
	}
	if _, err := task.Call(); err != nil {
		t.Fatal(err)
	}
	if gotArg != "x" {
		t.Errorf("arg = %q, want %q", gotArg, "x")
	}
	if gotCtx != task.Context {
		t.Error("the function did not receive the task's context")
	}
	if got := gotCtx.Value(ctxKey{}); got != "v" {
		t.Errorf("the context lost the parent's value: got %v", got)
	}
	if _, ok := gotCtx.Deadline(); !ok {
		t.Error("the context lost the parent's deadline")
	}
	if got := SignatureFromContext(gotCtx); got != sig {
		t.Errorf("SignatureFromContext = %p, want the signature %p", got, sig)
	}
	cancel()
	if gotCtx.Err() == nil {
		t.Error("cancelling the parent did not cancel the task's context")
	}

	task, err = NewWithSignature(fn, sig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Call(); err != nil {
		t.Fatal(err)
	}
	if got := SignatureFromContext(gotCtx); got != sig {
		t.Errorf("NewWithSignature: SignatureFromContext = %p, want %p", got, sig)
	}

	task, err = New(fn, sig.Args)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Call(); err != nil {
		t.Fatal(err)
	}
	if gotCtx == nil || SignatureFromContext(gotCtx) != nil {
		t.Errorf("New: context %v, want a non-nil context without a signature", gotCtx)
	}

	task, err = New(add, []Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if task.UseContext {
		t.Error("UseContext is true for a function without a context")
	}
}

func TestCallErrorOnlyGivesEmptyNonNilResults(t *testing.T) {
	t.Parallel()
	task, err := New(func() error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	results, err := task.Call()
	if err != nil {
		t.Fatal(err)
	}
	if results == nil || len(results) != 0 {
		t.Errorf("Call = %#v, want an empty non-nil slice", results)
	}
}

func TestCallRecoversPanics(t *testing.T) {
	t.Parallel()
	oops := errors.New("oops")
	tests := []struct {
		name    string
		value   interface{}
		msg     string
		wrapped error
	}{
		{"error", oops, "oops", oops},
		{"string", "boom", "boom", nil},
		{"int", 42, "Invoking task caused a panic: 42", ErrTaskPanicked},
		{"struct", struct{ A int }{1}, "Invoking task caused a panic: {1}", ErrTaskPanicked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := New(func() (int, error) { panic(tc.value) }, nil)
			if err != nil {
				t.Fatal(err)
			}
			results, err := task.Call()
			if results != nil {
				t.Errorf("Call returned results %v with a panic", results)
			}
			if err == nil {
				t.Fatal("Call returned no error for a panic")
			}
			if err.Error() != tc.msg {
				t.Errorf("error = %q, want %q", err, tc.msg)
			}
			if tc.wrapped != nil && !errors.Is(err, tc.wrapped) {
				t.Errorf("errors.Is(%q, %q) = false", err, tc.wrapped)
			}
			if tc.wrapped != ErrTaskPanicked && errors.Is(err, ErrTaskPanicked) {
				t.Errorf("a panic with a %s wraps ErrTaskPanicked", tc.name)
			}
			var pe *PanicError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *PanicError", err)
			}
			if pe.Value != tc.value {
				t.Errorf("PanicError.Value = %v, want %v", pe.Value, tc.value)
			}
			if !strings.Contains(string(pe.Stack), "TestCallRecoversPanics") {
				t.Errorf("PanicError.Stack does not show where the panic was:\n%s", pe.Stack)
			}
		})
	}
}

func TestCallRecoversNilPointerDereference(t *testing.T) {
	t.Parallel()
	task, err := New(func() (int, error) {
		var p *struct{ X int }
		return p.X, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = task.Call()
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "nil pointer dereference") {
		t.Errorf("Call = %v, want a *PanicError about a nil pointer dereference", err)
	}
}

type point struct{ X, Y int }

type ptrError struct{}

func (*ptrError) Error() string { return "ptr error" }

func TestCallNilResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   interface{}
		want []*TaskResult
	}{
		{"nil pointer", func() (*point, error) { return nil, nil }, []*TaskResult{{Type: "*tasks.point", Value: nil}}},
		{"nil interface", func() (interface{}, error) { return nil, nil }, []*TaskResult{{Type: "interface {}", Value: nil}}},
		{"nil error result", func() (error, error) { return nil, nil }, []*TaskResult{{Type: "error", Value: nil}}},
		{"nil map", func() (map[string]int, error) { return nil, nil }, []*TaskResult{{Type: "map[string]int", Value: nil}}},
		{"nil slice", func() ([]int, error) { return nil, nil }, []*TaskResult{{Type: "[]int", Value: nil}}},
		{"interface holding a value", func() (interface{}, error) { return int64(7), nil }, []*TaskResult{{Type: "int64", Value: int64(7)}}},
		{"non-nil pointer", func() (*point, error) { return &point{1, 2}, nil }, []*TaskResult{{Type: "*tasks.point", Value: &point{1, 2}}}},
		{"struct", func() (point, error) { return point{3, 4}, nil }, []*TaskResult{{Type: "tasks.point", Value: point{3, 4}}}},
		{"nil concrete error type", func() (int, *ptrError) { return 1, nil }, []*TaskResult{{Type: "int", Value: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := New(tc.fn, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := task.Call()
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Call = %s, want %s", formatResults(got), formatResults(tc.want))
			}
		})
	}
}

type customRetriable struct{}

func (customRetriable) Error() string          { return "custom" }
func (customRetriable) RetryIn() time.Duration { return time.Minute }

func TestCallReturnsTheErrorUnchanged(t *testing.T) {
	t.Parallel()
	retry := fmt.Errorf("fetching: %w", NewErrRetryTaskLater("busy", 3*time.Second))
	tests := []struct {
		name string
		err  error
	}{
		{"plain", errors.New("failed")},
		{"wrapped ErrRetryTaskLater", retry},
		{"ErrRetryTaskLater", NewErrRetryTaskLater("later", time.Second)},
		{"custom Retriable", customRetriable{}},
		{"non-nil concrete error type", &ptrError{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := New(func() (string, error) { return "ignored", tc.err }, nil)
			if err != nil {
				t.Fatal(err)
			}
			results, err := task.Call()
			if results != nil {
				t.Errorf("Call returned results %v along with an error", results)
			}
			if err != tc.err {
				t.Errorf("Call error = %#v, want exactly %#v", err, tc.err)
			}
		})
	}

	task, err := New(func() error { return retry }, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = task.Call()
	var later ErrRetryTaskLater
	if !errors.As(err, &later) || later.RetryIn() != 3*time.Second {
		t.Errorf("errors.As did not find the ErrRetryTaskLater with its delay in %v", err)
	}
	var retriable Retriable
	if !errors.As(err, &retriable) || retriable.RetryIn() != 3*time.Second {
		t.Errorf("errors.As did not find a Retriable in %v", err)
	}

	task, err = New(func() (int, *ptrError) { return 0, &ptrError{} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Call(); err == nil || err.Error() != "ptr error" {
		t.Errorf("Call with a concrete error type = %v, want \"ptr error\"", err)
	}
}

func TestCallWithoutFunction(t *testing.T) {
	t.Parallel()
	if _, err := (&Task{}).Call(); !errors.Is(err, ErrTaskMustBeFunc) {
		t.Errorf("Call on an empty Task = %v, want ErrTaskMustBeFunc", err)
	}
	if _, err := (&Task{TaskFunc: reflect.ValueOf(func() {})}).Call(); !errors.Is(err, ErrTaskReturnsNoValue) {
		t.Errorf("Call of a function returning nothing = %v, want ErrTaskReturnsNoValue", err)
	}
	// Args that were not checked by ReflectArgs make reflect panic; Call
	// turns the panic into an error.
	_, err := (&Task{TaskFunc: reflect.ValueOf(add)}).Call()
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "too few input arguments") {
		t.Errorf("Call with missing args = %v, want a *PanicError from reflect", err)
	}
}

func TestValidateTask(t *testing.T) {
	t.Parallel()
	var nilFunc func() error
	tests := []struct {
		name string
		task interface{}
		want error
	}{
		{"nil", nil, ErrTaskMustBeFunc},
		{"int", 1, ErrTaskMustBeFunc},
		{"string", "add", ErrTaskMustBeFunc},
		{"nil func", nilFunc, ErrTaskMustBeFunc},
		{"returns nothing", func() {}, ErrTaskReturnsNoValue},
		{"returns no error", func() int { return 0 }, ErrLastReturnValueMustBeError},
		{"error not last", func() (error, int) { return nil, 0 }, ErrLastReturnValueMustBeError},
		{"returns error", func() error { return nil }, nil},
		{"returns value and error", add, nil},
		{"variadic", sum, nil},
		{"concrete error type", func() *ptrError { return nil }, nil},
		{"with context", func(context.Context) error { return nil }, nil},
	}
	for _, tc := range tests {
		if got := ValidateTask(tc.task); got != tc.want {
			t.Errorf("ValidateTask(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// machineryWireExample is a message as machinery writes it (issue #690).
const machineryWireExample = `{"UUID":"task_1","Name":"pmapDecode","RoutingKey":"machinery_tasks","ETA":null,"GroupUUID":"","GroupTaskCount":0,"Args":[{"Name":"","Type":"[]string","Value":["a"]}],"Headers":{},"Priority":0,"Immutable":false,"RetryCount":0,"RetryTimeout":0,"OnSuccess":null,"OnError":null,"ChordCallback":null,"BrokerMessageGroupId":"","SQSReceiptHandle":"","StopTaskDeletionOnError":false,"IgnoreWhenTaskNotRegistered":false}`

func TestDecodeSignatureMachineryMessage(t *testing.T) {
	t.Parallel()
	sig, err := DecodeSignature([]byte(machineryWireExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &Signature{
		UUID:       "task_1",
		Name:       "pmapDecode",
		RoutingKey: "machinery_tasks",
		Args:       []Arg{{Type: "[]string", Value: []interface{}{"a"}}},
		Headers:    Headers{},
	}
	if !reflect.DeepEqual(sig, want) {
		t.Errorf("DecodeSignature = %+v, want %+v", sig, want)
	}

	task, err := NewWithSignature(func(xs []string) (string, error) { return strings.Join(xs, ","), nil }, sig)
	if err != nil {
		t.Fatal(err)
	}
	results, err := task.Call()
	if err != nil {
		t.Fatal(err)
	}
	if got := results[0].Value; got != "a" {
		t.Errorf("task result = %v, want a", got)
	}
}

func TestDecodeSignatureKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	sig, err := DecodeSignature([]byte(`{"Name":"n","Args":[{"Type":"int64","Value":9007199254740993}],"Headers":{"n":1.5},"Timeout":1000000000}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := sig.Args[0].Value; got != json.Number("9007199254740993") {
		t.Errorf("Arg value = %#v, want json.Number(\"9007199254740993\")", got)
	}
	if got := sig.Headers["n"]; got != json.Number("1.5") {
		t.Errorf("header value = %#v, want json.Number(\"1.5\")", got)
	}
	if sig.Timeout != time.Second {
		t.Errorf("Timeout = %v, want 1s", sig.Timeout)
	}
}

func TestDecodeSignatureRejectsBadMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		msg  string
	}{
		{"empty", "", "EOF"},
		{"garbage", "\x00garbage", "invalid character"},
		{"truncated", `{"Name":"x"`, "unexpected EOF"},
		{"trailing data", `{"Name":"x"} {"Name":"y"}`, "trailing data"},
		{"trailing garbage", `{"Name":"x"}]`, "trailing data"},
		{"null", "null", "signature is nil"},
		{"no name", `{"UUID":"task_9"}`, `signature has no task name (UUID "task_9")`},
		{"array", `[1]`, "cannot unmarshal array"},
		{"bad ETA", `{"Name":"x","ETA":"tomorrow"}`, "cannot parse"},
		{"bad field type", `{"Name":"x","RetryCount":"3"}`, "cannot unmarshal string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sig, err := DecodeSignature([]byte(tc.data))
			if sig != nil {
				t.Errorf("DecodeSignature returned %+v along with an error", sig)
			}
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not wrap ErrDecode", err)
			}
			if !strings.HasPrefix(err.Error(), "tasks: cannot decode signature: ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q, want one containing %q", err, tc.msg)
			}
		})
	}
}

func TestEncodeSignatureRoundTrip(t *testing.T) {
	t.Parallel()
	eta := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	sig := &Signature{
		UUID:       "task_a",
		Name:       "add",
		ETA:        &eta,
		Args:       []Arg{{Name: "a", Type: "int64", Value: 1}, {Type: "[]byte", Value: []byte("xy")}},
		Headers:    Headers{"traceparent": "00-abc"},
		RetryCount: 2,
		OnSuccess:  []*Signature{{UUID: "task_b", Name: "next"}},
	}
	data, err := EncodeSignature(sig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"Name":"add"`) || strings.Contains(string(data), `"Timeout"`) {
		t.Errorf("EncodeSignature wrote %s; want machinery's field names and no zero Timeout", data)
	}
	got, err := DecodeSignature(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "add" || !got.ETA.Equal(eta) || got.RetryCount != 2 || got.OnSuccess[0].Name != "next" || got.Headers.Get("traceparent") != "00-abc" {
		t.Errorf("round trip gave %+v", got)
	}
	task, err := NewWithSignature(func(a int64, b []byte) (string, error) { return fmt.Sprint(a, string(b)), nil }, got)
	if err != nil {
		t.Fatal(err)
	}
	results, err := task.Call()
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Value != "1xy" {
		t.Errorf("task on decoded args returned %v, want 1xy", results[0].Value)
	}
}

// TestDecodeSignatureAppendsParentResults: a workflow node's message gets
// its deps' results from the store as ParentResults, appended to Args in
// order, numbers exact, unless the node is Immutable.
func TestDecodeSignatureAppendsParentResults(t *testing.T) {
	msg := `{"Name":"join","Args":[{"Type":"string","Value":"x"}],"ParentResults":[[{"Type":"int64","Value":9007199254740993}],[],[{"Type":"string","Value":"b"}]]}`
	sig, err := DecodeSignature([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(sig.Args))
	for i, a := range sig.Args {
		got[i] = fmt.Sprint(a.Type, "=", a.Value)
	}
	if want := []string{"string=x", "int64=9007199254740993", "string=b"}; !slices.Equal(got, want) {
		t.Fatalf("args %v, want %v", got, want)
	}
	sig, err = DecodeSignature([]byte(`{"Name":"join","Immutable":true,"ParentResults":[[{"Type":"int64","Value":1}]]}`))
	if err != nil || len(sig.Args) != 0 {
		t.Fatalf("an Immutable node got args %v (%v), want none", sig.Args, err)
	}
}
