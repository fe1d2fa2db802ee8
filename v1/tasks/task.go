package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime/debug"
)

// Task is a task function ready to be called with its arguments.
type Task struct {
	// TaskFunc is the task function.
	TaskFunc reflect.Value
	// UseContext is true when the function's first parameter is
	// context.Context; Call then passes Context there.
	UseContext bool
	// Context is the task's context. It carries the signature (see
	// SignatureFromContext) when the task was made from one.
	Context context.Context
	// Args are the arguments, converted to the function's parameter types,
	// without the context.
	Args []reflect.Value
}

// New returns a task that calls taskFunc with args, with
// context.Background() as its context.
func New(taskFunc interface{}, args []Arg) (*Task, error) {
	return newTask(context.Background(), taskFunc, args)
}

// NewWithSignature returns a task that calls taskFunc with the signature's
// args. Its context is context.Background() carrying the signature.
func NewWithSignature(taskFunc interface{}, signature *Signature) (*Task, error) {
	return NewWithContext(context.Background(), taskFunc, signature)
}

// NewWithContext returns a task that calls taskFunc with the signature's
// args. Its context is ctx carrying the signature, so a task function that
// takes a context sees ctx's deadline and cancellation (machinery's task
// contexts have neither). A nil ctx is taken as context.Background().
func NewWithContext(ctx context.Context, taskFunc interface{}, signature *Signature) (*Task, error) {
	if signature == nil {
		return nil, ErrNilSignature
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return newTask(WithSignature(ctx, signature), taskFunc, signature.Args)
}

func newTask(ctx context.Context, taskFunc interface{}, args []Arg) (*Task, error) {
	if err := ValidateTask(taskFunc); err != nil {
		return nil, err
	}
	t := &Task{TaskFunc: reflect.ValueOf(taskFunc), Context: ctx}
	if err := t.ReflectArgs(args); err != nil {
		return nil, err
	}
	return t, nil
}

// ReflectArgs converts args with ReflectValue, checks them against the
// task function's parameters and stores them in t.Args. It sets
// t.UseContext when the first parameter is context.Context; that parameter
// takes no arg.
//
// The number of args must be the number of the other parameters (for a
// variadic function, at least the number of fixed ones). An arg whose type
// is not the parameter's is still taken when both are numeric (or slices of
// numbers) and the value fits exactly, so Type "int64" fits a parameter of
// type int; an arg with an empty Type takes the parameter's type when that
// is a supported one. Every mismatch gives an error wrapping ErrArgs that
// names the arg and both types; t is then left unchanged.
func (t *Task) ReflectArgs(args []Arg) error {
	if !t.TaskFunc.IsValid() || t.TaskFunc.Kind() != reflect.Func {
		return ErrTaskMustBeFunc
	}
	fn := t.TaskFunc.Type()
	offset := 0
	if fn.NumIn() > 0 && IsContextType(fn.In(0)) {
		offset = 1
	}
	params := fn.NumIn() - offset
	switch {
	case fn.IsVariadic() && len(args) < params-1:
		return fmt.Errorf("%w: got %d args, the function takes at least %d", ErrArgs, len(args), params-1)
	case !fn.IsVariadic() && len(args) != params:
		return fmt.Errorf("%w: got %d args, the function takes %d", ErrArgs, len(args), params)
	}

	values := make([]reflect.Value, len(args))
	for i, arg := range args {
		var param reflect.Type
		if fn.IsVariadic() && offset+i >= fn.NumIn()-1 {
			param = fn.In(fn.NumIn() - 1).Elem()
		} else {
			param = fn.In(offset + i)
		}
		v, err := reflectArg(arg, param)
		if err != nil {
			return fmt.Errorf("%w: arg %d %w", ErrArgs, i, err)
		}
		values[i] = v
	}
	t.UseContext = offset == 1
	t.Args = values
	return nil
}

// argError is the part of a ReflectArgs error after "arg <i> ".
type argError struct {
	msg string
}

func (e *argError) Error() string { return e.msg }

// reflectArg converts arg to a value of type param, or says why it cannot.
func reflectArg(arg Arg, param reflect.Type) (reflect.Value, error) {
	argType := arg.Type
	if argType == "" {
		if typesMap[param.String()] == nil {
			return reflect.Value{}, &argError{fmt.Sprintf("(Type \"\") cannot be used as %s: an empty Type needs a parameter of a supported type", param)}
		}
		argType = param.String()
	}
	v, err := reflectValue(argType, arg.Value)
	var ce *conversionError
	switch {
	case errors.As(err, &ce):
		return reflect.Value{}, &argError{fmt.Sprintf("(Type %q): %v", arg.Type, ce)}
	case err != nil:
		return reflect.Value{}, fmt.Errorf("(Type %q): %w", arg.Type, err)
	}
	if v.Type().AssignableTo(param) {
		return v, nil
	}
	cannot := fmt.Sprintf("(Type %q) cannot be used as %s", arg.Type, param)
	var converted reflect.Value
	switch {
	case isScalarKind(param.Kind()) && sameFamily(v.Type().Kind(), param.Kind()):
		converted, err = convertScalar(param, v.Interface())
	case param.Kind() == reflect.Slice && v.Kind() == reflect.Slice &&
		isScalarKind(param.Elem().Kind()) && sameFamily(v.Type().Elem().Kind(), param.Elem().Kind()):
		converted, err = convertSlice(param, v.Interface())
	default:
		return reflect.Value{}, &argError{cannot}
	}
	if err != nil {
		return reflect.Value{}, &argError{fmt.Sprintf("%s: %v", cannot, err)}
	}
	return converted, nil
}

// sameFamily reports whether a value of kind a may be converted to kind b
// by value: both numeric, both bool or both string.
func sameFamily(a, b reflect.Kind) bool {
	family := func(k reflect.Kind) int {
		switch k {
		case reflect.Bool:
			return 1
		case reflect.String:
			return 2
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
			reflect.Float32, reflect.Float64:
			return 3
		}
		return 0
	}
	return family(a) != 0 && family(a) == family(b)
}

// Call calls the task function with t.Args, preceded by t.Context when
// t.UseContext is set.
//
// A non-nil last return value (the error) is returned as it is, so a
// wrapped ErrRetryTaskLater can be found with errors.As. Otherwise every
// other return value becomes a TaskResult whose Type is the declared return
// type (the dynamic type for a non-nil value of an interface type) and
// whose Value is the value, nil for a nil pointer, interface, slice or map.
// A function that returns only an error gives an empty, non-nil slice.
//
// A panic in the function is recovered and returned as a *PanicError.
func (t *Task) Call() (taskResults []*TaskResult, err error) {
	if !t.TaskFunc.IsValid() || t.TaskFunc.Kind() != reflect.Func || t.TaskFunc.IsNil() {
		return nil, ErrTaskMustBeFunc
	}
	fn := t.TaskFunc.Type()
	if fn.NumOut() == 0 {
		return nil, ErrTaskReturnsNoValue
	}
	if !fn.Out(fn.NumOut() - 1).Implements(errorType) {
		return nil, ErrLastReturnValueMustBeError
	}

	defer func() {
		if r := recover(); r != nil {
			taskResults = nil
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()

	args := t.Args
	if t.UseContext {
		ctx := t.Context
		if ctx == nil {
			ctx = context.Background()
		}
		args = make([]reflect.Value, 0, len(t.Args)+1)
		args = append(args, reflect.ValueOf(ctx))
		args = append(args, t.Args...)
	}
	results := t.TaskFunc.Call(args)

	last := results[len(results)-1]
	if !canBeNil(last.Kind()) || !last.IsNil() {
		return nil, last.Interface().(error)
	}

	taskResults = make([]*TaskResult, 0, len(results)-1)
	for i, r := range results[:len(results)-1] {
		result := &TaskResult{Type: fn.Out(i).String()}
		switch {
		case canBeNil(r.Kind()) && r.IsNil():
		case r.Kind() == reflect.Interface:
			result.Type = r.Elem().Type().String()
			result.Value = r.Interface()
		default:
			result.Value = r.Interface()
		}
		taskResults = append(taskResults, result)
	}
	return taskResults, nil
}

// canBeNil reports whether a value of kind k may be nil.
func canBeNil(k reflect.Kind) bool {
	switch k {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice, reflect.UnsafePointer:
		return true
	}
	return false
}

// ValidateTask reports whether task can be registered: it must be a
// non-nil function (ErrTaskMustBeFunc) that returns at least one value
// (ErrTaskReturnsNoValue), the last of which is an error
// (ErrLastReturnValueMustBeError).
func ValidateTask(task interface{}) error {
	v := reflect.ValueOf(task)
	if v.Kind() != reflect.Func || v.IsNil() {
		return ErrTaskMustBeFunc
	}
	t := v.Type()
	if t.NumOut() == 0 {
		return ErrTaskReturnsNoValue
	}
	if !t.Out(t.NumOut() - 1).Implements(errorType) {
		return ErrLastReturnValueMustBeError
	}
	return nil
}

// DecodeSignature decodes a signature from its JSON message, with numbers
// decoded as json.Number as machinery does. Trailing data after the JSON
// value, and a signature that fails Validate, are errors. Every error wraps
// ErrDecode.
func DecodeSignature(data []byte) (*Signature, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	m := message{Signature: new(Signature)}
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: trailing data after the JSON value at offset %d", ErrDecode, dec.InputOffset())
	}
	sig := m.Signature
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		sig = nil // Validate says so
	}
	if sig != nil && !sig.Immutable {
		for _, results := range m.ParentResults {
			sig.Args = append(sig.Args, ResultArgs(results)...)
		}
	}
	if err := sig.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return sig, nil
}

// message is a task's message as DecodeSignature reads it: a signature
// and, for a node of a workflow's graph, the results of the nodes it
// depends on, in the order of its deps (WorkflowNode.Deps), which the
// store adds to the node's message when it releases the node. They are
// appended to Args, unless the node is Immutable.
type message struct {
	*Signature
	ParentResults [][]*TaskResult
}

// ResultArgs returns results as args, in order: what a task that follows
// another (a chain's next step, a chord's callback, a workflow's node)
// gets appended to its Args unless it is Immutable.
func ResultArgs(results []*TaskResult) []Arg {
	args := make([]Arg, len(results))
	for i, r := range results {
		args[i] = Arg{Type: r.Type, Value: r.Value}
	}
	return args
}

// EncodeSignature encodes sig as the JSON message DecodeSignature (and
// machinery) reads, in the store's compact form: machinery's field names,
// and only the fields that are set (json.Marshal writes machinery's shape,
// with every machinery field).
func EncodeSignature(sig *Signature) ([]byte, error) {
	return encodeStored(sig)
}
