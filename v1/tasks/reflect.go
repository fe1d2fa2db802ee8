package tasks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// typesMap holds the 29 supported Arg.Type strings and the Go type each one
// stands for. "[]byte" and "[]uint8" are the same Go type.
var typesMap = map[string]reflect.Type{
	"bool":    reflect.TypeFor[bool](),
	"int":     reflect.TypeFor[int](),
	"int8":    reflect.TypeFor[int8](),
	"int16":   reflect.TypeFor[int16](),
	"int32":   reflect.TypeFor[int32](),
	"int64":   reflect.TypeFor[int64](),
	"uint":    reflect.TypeFor[uint](),
	"uint8":   reflect.TypeFor[uint8](),
	"uint16":  reflect.TypeFor[uint16](),
	"uint32":  reflect.TypeFor[uint32](),
	"uint64":  reflect.TypeFor[uint64](),
	"float32": reflect.TypeFor[float32](),
	"float64": reflect.TypeFor[float64](),
	"string":  reflect.TypeFor[string](),

	"[]bool":    reflect.TypeFor[[]bool](),
	"[]int":     reflect.TypeFor[[]int](),
	"[]int8":    reflect.TypeFor[[]int8](),
	"[]int16":   reflect.TypeFor[[]int16](),
	"[]int32":   reflect.TypeFor[[]int32](),
	"[]int64":   reflect.TypeFor[[]int64](),
	"[]uint":    reflect.TypeFor[[]uint](),
	"[]uint8":   reflect.TypeFor[[]uint8](),
	"[]uint16":  reflect.TypeFor[[]uint16](),
	"[]uint32":  reflect.TypeFor[[]uint32](),
	"[]uint64":  reflect.TypeFor[[]uint64](),
	"[]float32": reflect.TypeFor[[]float32](),
	"[]float64": reflect.TypeFor[[]float64](),
	"[]string":  reflect.TypeFor[[]string](),
	"[]byte":    reflect.TypeFor[[]byte](),
}

var (
	contextType = reflect.TypeFor[context.Context]()
	errorType   = reflect.TypeFor[error]()
)

// ReflectValue converts value to the Go type named by valueType, one of the
// 29 supported type strings: bool, int, int8, int16, int32, int64, uint,
// uint8, uint16, uint32, uint64, float32, float64, string, and []T of each of
// them plus []byte. Any other valueType gives an ErrUnsupportedType.
//
// value may be what encoding/json produces with UseNumber (json.Number,
// string, bool, []interface{}, nil) or a Go value:
//
//   - integer types take a json.Number written as an integer, or a Go value
//     of any integer or float kind whose value the type holds exactly;
//   - float types take a json.Number, or a Go value of any integer or float
//     kind that is within range (an integer must be exactly representable);
//   - bool takes only a bool and string only a string;
//   - slice types take nil (giving an empty, non-nil slice) or any slice or
//     array, converted element by element by the rules above; []byte also
//     takes a string, which is decoded as standard base64 because that is
//     how encoding/json writes []byte.
//
// A value that does not convert gives an error wrapping ErrArgs that says
// "<value> is not <type>" and why.
func ReflectValue(valueType string, value interface{}) (reflect.Value, error) {
	v, err := reflectValue(valueType, value)
	var ce *conversionError
	if errors.As(err, &ce) {
		return reflect.Value{}, fmt.Errorf("%w: %v", ErrArgs, ce)
	}
	return v, err
}

// reflectValue is ReflectValue with conversion failures returned as a bare
// *conversionError, so that callers can put their own context before it.
func reflectValue(valueType string, value interface{}) (reflect.Value, error) {
	t, ok := typesMap[valueType]
	if !ok {
		return reflect.Value{}, NewErrUnsupportedType(valueType)
	}
	if t.Kind() == reflect.Slice {
		return convertSlice(t, value)
	}
	return convertScalar(t, value)
}

// conversionError says why a value is not of a type, in machinery's words:
// "<value> is not <type>: <why>".
type conversionError struct {
	value interface{}
	typ   reflect.Type
	why   string
}

func (e *conversionError) Error() string {
	return fmt.Sprintf("%s is not %s: %s", formatValue(e.value), e.typ, e.why)
}

// maxValueLen bounds how much of a value an error message quotes.
const maxValueLen = 64

// formatValue formats v for an error message: strings quoted, everything
// else with %v, cut to maxValueLen bytes.
func formatValue(v interface{}) string {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		if len(x) > maxValueLen {
			return strconv.Quote(truncate(x)) + "…"
		}
		return strconv.Quote(x)
	default:
		s = fmt.Sprintf("%v", v)
	}
	if len(s) > maxValueLen {
		return truncate(s) + "…"
	}
	return s
}

// truncate cuts s to at most maxValueLen bytes without splitting a rune.
func truncate(s string) string {
	if len(s) <= maxValueLen {
		return s
	}
	s = s[:maxValueLen]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// kindMismatch says what value is, for a value of the wrong kind.
func kindMismatch(value interface{}) string {
	switch value.(type) {
	case nil:
		return "it is null"
	case json.Number:
		return "it is a number"
	}
	return fmt.Sprintf("it is of type %T", value)
}

// convertScalar converts value to t, whose kind is bool, string, an integer
// or a float kind. t may be a named type (time.Duration, say).
func convertScalar(t reflect.Type, value interface{}) (reflect.Value, error) {
	fail := func(why string) (reflect.Value, error) {
		return reflect.Value{}, &conversionError{value: value, typ: t, why: why}
	}
	out := reflect.New(t).Elem()
	rv := reflect.ValueOf(value)
	switch t.Kind() {
	case reflect.Bool:
		if rv.Kind() == reflect.Bool {
			out.SetBool(rv.Bool())
			return out, nil
		}
	case reflect.String:
		if _, isNumber := value.(json.Number); !isNumber && rv.Kind() == reflect.String {
			out.SetString(rv.String())
			return out, nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, why := toInt64(value, rv)
		if why == "" && out.OverflowInt(i) {
			why = "it overflows " + t.String()
		}
		if why != "" {
			return fail(why)
		}
		out.SetInt(i)
		return out, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u, why := toUint64(value, rv)
		if why == "" && out.OverflowUint(u) {
			why = "it overflows " + t.String()
		}
		if why != "" {
			return fail(why)
		}
		out.SetUint(u)
		return out, nil
	case reflect.Float32, reflect.Float64:
		f, why := toFloat64(value, rv, t.Bits())
		if why == "" && out.OverflowFloat(f) {
			why = "it overflows " + t.String()
		}
		if why != "" {
			return fail(why)
		}
		out.SetFloat(f)
		return out, nil
	default:
		return fail("the type is not a scalar")
	}
	return fail(kindMismatch(value))
}

// twoTo63 and twoTo64 are 2^63 and 2^64: the first floats beyond int64 and
// uint64.
const (
	twoTo63 = float64(1 << 63)
	twoTo64 = 2 * twoTo63
)

// isJSONNumber reports whether s is a number as JSON writes it.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

// notAnInteger says why the json.Number n, which is not written as an
// integer, is not one.
func notAnInteger(n json.Number) string {
	f, err := strconv.ParseFloat(string(n), 64)
	if err == nil && f == math.Trunc(f) {
		return "it is written as a float, not an integer"
	}
	return "it is not an integer"
}

// toInt64 returns value as an int64, or why it is not an integer that fits
// one.
func toInt64(value interface{}, rv reflect.Value) (int64, string) {
	if n, ok := value.(json.Number); ok {
		if !isJSONNumber(string(n)) {
			return 0, "it is not a valid JSON number"
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		switch {
		case err == nil:
			return i, ""
		case errors.Is(err, strconv.ErrRange):
			return 0, "it overflows int64"
		default:
			return 0, notAnInteger(n)
		}
	}
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), ""
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return 0, "it overflows int64"
		}
		return int64(u), ""
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
			return 0, "it is not an integer"
		}
		if f < -twoTo63 || f >= twoTo63 {
			return 0, "it overflows int64"
		}
		return int64(f), ""
	}
	return 0, kindMismatch(value)
}

// toUint64 returns value as a uint64, or why it is not a non-negative
// integer that fits one.
func toUint64(value interface{}, rv reflect.Value) (uint64, string) {
	if n, ok := value.(json.Number); ok {
		if !isJSONNumber(string(n)) {
			return 0, "it is not a valid JSON number"
		}
		u, err := strconv.ParseUint(string(n), 10, 64)
		switch {
		case err == nil:
			return u, ""
		case errors.Is(err, strconv.ErrRange):
			return 0, "it overflows uint64"
		}
		// ParseUint takes no sign: "-0" is zero, "-5" is negative.
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			if i == 0 && err == nil {
				return 0, ""
			}
			return 0, "it is negative"
		}
		if strings.HasPrefix(string(n), "-") {
			if f, err := strconv.ParseFloat(string(n), 64); err == nil && f < 0 {
				return 0, "it is negative"
			}
		}
		return 0, notAnInteger(n)
	}
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i := rv.Int()
		if i < 0 {
			return 0, "it is negative"
		}
		return uint64(i), ""
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return rv.Uint(), ""
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
			return 0, "it is not an integer"
		}
		if f < 0 {
			return 0, "it is negative"
		}
		if f >= twoTo64 {
			return 0, "it overflows uint64"
		}
		return uint64(f), ""
	}
	return 0, kindMismatch(value)
}

// toFloat64 returns value as a float64 that a float of the given bit size
// holds (out-of-range values are left for OverflowFloat to catch), or why
// it cannot be one.
func toFloat64(value interface{}, rv reflect.Value, bits int) (float64, string) {
	if n, ok := value.(json.Number); ok {
		if !isJSONNumber(string(n)) {
			return 0, "it is not a valid JSON number"
		}
		f, err := strconv.ParseFloat(string(n), bits)
		if err != nil {
			// A well-formed number fails only by being out of range.
			return 0, fmt.Sprintf("it overflows float%d", bits)
		}
		return f, ""
	}
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i := rv.Int()
		f := roundFloat(float64(i), bits)
		if f >= twoTo63 || int64(f) != i {
			return 0, fmt.Sprintf("float%d cannot hold it exactly", bits)
		}
		return f, ""
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		f := roundFloat(float64(u), bits)
		if f >= twoTo64 || uint64(f) != u {
			return 0, fmt.Sprintf("float%d cannot hold it exactly", bits)
		}
		return f, ""
	case reflect.Float32, reflect.Float64:
		return rv.Float(), ""
	}
	return 0, kindMismatch(value)
}

// roundFloat rounds f to the nearest float of the given bit size.
func roundFloat(f float64, bits int) float64 {
	if bits == 32 {
		return float64(float32(f))
	}
	return f
}

// isScalarKind reports whether convertScalar handles k.
func isScalarKind(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// convertSlice converts value to the slice type t, whose element kind is
// one convertScalar handles.
func convertSlice(t reflect.Type, value interface{}) (reflect.Value, error) {
	if value == nil {
		return reflect.MakeSlice(t, 0, 0), nil
	}
	if t.Elem().Kind() == reflect.Uint8 {
		var b []byte
		switch v := value.(type) {
		case string:
			decoded, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return reflect.Value{}, &conversionError{value: value, typ: t, why: "it is not standard base64: " + err.Error()}
			}
			b = decoded
		case []byte:
			b = v
		}
		if b != nil {
			out := reflect.MakeSlice(t, len(b), len(b))
			reflect.Copy(out, reflect.ValueOf(b))
			return out, nil
		}
	}
	rv := reflect.ValueOf(value)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return reflect.Value{}, &conversionError{value: value, typ: t, why: kindMismatch(value)}
	}
	n := rv.Len()
	out := reflect.MakeSlice(t, n, n)
	for i := 0; i < n; i++ {
		var elem interface{}
		if e := rv.Index(i); e.CanInterface() {
			elem = e.Interface()
		}
		v, err := convertScalar(t.Elem(), elem)
		if err != nil {
			return reflect.Value{}, &conversionError{value: value, typ: t, why: fmt.Sprintf("element %d: %v", i, err)}
		}
		out.Index(i).Set(v)
	}
	return out, nil
}

// IsContextType reports whether t is exactly context.Context, the type a
// task function's first parameter has when it wants the task's context.
func IsContextType(t reflect.Type) bool {
	return t == contextType
}

// nilValue is a valid reflect.Value holding a nil interface{}, whose
// Interface() returns nil.
func nilValue() reflect.Value {
	return reflect.New(reflect.TypeFor[interface{}]()).Elem()
}

// ReflectTaskResults converts results, as a result backend returns them,
// into values: a result whose Type is one of the supported types goes
// through ReflectValue; any other result (a struct, a map) is returned as
// its Value is, since there is no Go type to convert it to. A nil Value
// becomes a valid reflect.Value holding a nil interface{}.
func ReflectTaskResults(taskResults []*TaskResult) ([]reflect.Value, error) {
	out := make([]reflect.Value, len(taskResults))
	for i, r := range taskResults {
		switch {
		case r == nil:
			out[i] = nilValue()
		case typesMap[r.Type] != nil:
			v, err := ReflectValue(r.Type, r.Value)
			if err != nil {
				return nil, fmt.Errorf("tasks: result %d: %w", i, err)
			}
			out[i] = v
		case r.Value == nil:
			out[i] = nilValue()
		default:
			out[i] = reflect.ValueOf(r.Value)
		}
	}
	return out, nil
}

// HumanReadableResults formats results for a log line: a single result
// with %v, any other number of them as "[a, b, c]". A zero reflect.Value
// prints as "<nil>".
func HumanReadableResults(results []reflect.Value) string {
	if len(results) == 1 {
		return formatResult(results[0])
	}
	parts := make([]string, len(results))
	for i, r := range results {
		parts[i] = formatResult(r)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func formatResult(v reflect.Value) string {
	switch {
	case !v.IsValid():
		return "<nil>"
	case v.CanInterface():
		return fmt.Sprintf("%v", v.Interface())
	default:
		return fmt.Sprintf("%v", v)
	}
}
