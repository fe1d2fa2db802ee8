package result

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Get1 waits until ctx ends for the task of r, which returns one result,
// and returns it as a T:
//
//	url, err := result.Get1[string](ctx, res)
//
// A result of another type is converted when it is of T's kind (an int64
// into a named int64 type); a struct or map result (which the backend
// keeps as JSON) is decoded into T. Anything else, or a task with another
// number of results, is an error. It polls as GetWithContext does, and is
// woken when the task finishes where the backend can tell.
func Get1[T any](ctx context.Context, r *AsyncResult) (T, error) {
	var out T
	values, err := r.GetWithContext(ctx, defaultSleep)
	if err != nil {
		return out, err
	}
	if len(values) != 1 {
		return out, fmt.Errorf("result of task %s: %d results, want 1", r.Signature.UUID, len(values))
	}
	err = as(values[0], &out)
	return out, wrapResult(r, 0, err)
}

// Get2 is Get1 for a task that returns two results.
func Get2[T1, T2 any](ctx context.Context, r *AsyncResult) (T1, T2, error) {
	var a T1
	var b T2
	values, err := r.GetWithContext(ctx, defaultSleep)
	if err != nil {
		return a, b, err
	}
	if len(values) != 2 {
		return a, b, fmt.Errorf("result of task %s: %d results, want 2", r.Signature.UUID, len(values))
	}
	if err := wrapResult(r, 0, as(values[0], &a)); err != nil {
		return a, b, err
	}
	return a, b, wrapResult(r, 1, as(values[1], &b))
}

func wrapResult(r *AsyncResult, i int, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("result %d of task %s: %w", i, r.Signature.UUID, err)
}

// as stores v in *out: as it is when it is a T, converted when it is of
// T's kind, decoded from JSON when T is a struct, map or slice that v's
// decoded JSON fills.
func as[T any](v reflect.Value, out *T) error {
	want := reflect.TypeFor[T]()
	if !v.IsValid() || (v.Kind() == reflect.Interface && v.IsNil()) {
		return nil // a nil result: T's zero value
	}
	switch {
	case v.Type() == want:
		*out = v.Interface().(T)
		return nil
	case v.Kind() == want.Kind() && v.CanConvert(want) && isScalar(want.Kind()):
		*out = v.Convert(want).Interface().(T)
		return nil
	}
	switch want.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface:
		raw, err := json.Marshal(v.Interface())
		if err != nil {
			return fmt.Errorf("a %s is not a %s: %w", v.Type(), want, err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("a %s is not a %s: %w", v.Type(), want, err)
		}
		return nil
	}
	return fmt.Errorf("a %s is not a %s", v.Type(), want)
}

func isScalar(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}
