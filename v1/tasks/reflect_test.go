package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// supportedValues holds, for each of the 29 supported type strings, a value
// of that type that exercises it (extremes where there are some).
var supportedValues = []struct {
	typ  string
	want interface{}
}{
	{"bool", true},
	{"int", int(math.MinInt64)},
	{"int8", int8(math.MinInt8)},
	{"int16", int16(math.MaxInt16)},
	{"int32", int32(math.MinInt32)},
	{"int64", int64(math.MaxInt64)},
	{"uint", uint(math.MaxUint64)},
	{"uint8", uint8(math.MaxUint8)},
	{"uint16", uint16(math.MaxUint16)},
	{"uint32", uint32(math.MaxUint32)},
	{"uint64", uint64(math.MaxUint64)},
	{"float32", float32(0.1)},
	{"float64", 0.1},
	{"string", "héllo <&>"},
	{"[]bool", []bool{true, false}},
	{"[]int", []int{-1, 0, math.MaxInt64}},
	{"[]int8", []int8{math.MinInt8, math.MaxInt8}},
	{"[]int16", []int16{math.MinInt16, math.MaxInt16}},
	{"[]int32", []int32{math.MinInt32, math.MaxInt32}},
	{"[]int64", []int64{math.MinInt64, math.MaxInt64}},
	{"[]uint", []uint{0, math.MaxUint64}},
	{"[]uint8", []uint8{0, 1, 255}},
	{"[]uint16", []uint16{0, math.MaxUint16}},
	{"[]uint32", []uint32{0, math.MaxUint32}},
	{"[]uint64", []uint64{0, math.MaxUint64}},
	{"[]float32", []float32{0.1, -math.MaxFloat32}},
	{"[]float64", []float64{0.1, math.MaxFloat64, math.SmallestNonzeroFloat64}},
	{"[]string", []string{"a", "", "b"}},
	{"[]byte", []byte("\x00\xffbytes")},
}

func TestSupportedTypesAreExactlyThe29(t *testing.T) {
	t.Parallel()
	if len(typesMap) != 29 {
		t.Fatalf("typesMap has %d types, want 29", len(typesMap))
	}
	if len(supportedValues) != 29 {
		t.Fatalf("the test table has %d types, want 29", len(supportedValues))
	}
	for _, tc := range supportedValues {
		if _, ok := typesMap[tc.typ]; !ok {
			t.Errorf("%q is not supported", tc.typ)
		}
	}
}

func TestReflectValueGoValues(t *testing.T) {
	t.Parallel()
	for _, tc := range supportedValues {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			got, err := ReflectValue(tc.typ, tc.want)
			if err != nil {
				t.Fatalf("ReflectValue(%q, %#v): %v", tc.typ, tc.want, err)
			}
			if !reflect.DeepEqual(got.Interface(), tc.want) {
				t.Errorf("ReflectValue(%q, %#v) = %#v", tc.typ, tc.want, got.Interface())
			}
		})
	}
}

func TestReflectValueJSONNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ   string
		value interface{}
		want  interface{}
	}{
		{"int", json.Number("-9223372036854775808"), int(math.MinInt64)},
		{"int8", json.Number("-128"), int8(-128)},
		{"int16", json.Number("32767"), int16(32767)},
		{"int32", json.Number("-2147483648"), int32(math.MinInt32)},
		{"int64", json.Number("9007199254740993"), int64(9007199254740993)}, // not exact as a float64
		{"uint", json.Number("18446744073709551615"), uint(math.MaxUint64)},
		{"uint8", json.Number("255"), uint8(255)},
		{"uint16", json.Number("65535"), uint16(65535)},
		{"uint32", json.Number("4294967295"), uint32(math.MaxUint32)},
		{"uint64", json.Number("18446744073709551615"), uint64(math.MaxUint64)},
		{"uint64", json.Number("-0"), uint64(0)},
		{"float32", json.Number("1.5e3"), float32(1500)},
		{"float32", json.Number("3.4028234663852886e38"), float32(math.MaxFloat32)},
		{"float64", json.Number("-2.5"), -2.5},
		{"float64", json.Number("7"), 7.0},
		{"[]int", []interface{}{json.Number("1"), json.Number("-2")}, []int{1, -2}},
		{"[]int8", []interface{}{json.Number("127")}, []int8{127}},
		{"[]int16", []interface{}{json.Number("-32768")}, []int16{-32768}},
		{"[]int32", []interface{}{json.Number("5")}, []int32{5}},
		{"[]int64", []interface{}{json.Number("9223372036854775807")}, []int64{math.MaxInt64}},
		{"[]uint", []interface{}{json.Number("3")}, []uint{3}},
		{"[]uint8", []interface{}{json.Number("255"), json.Number("0")}, []uint8{255, 0}},
		{"[]byte", []interface{}{json.Number("1")}, []byte{1}},
		{"[]uint16", []interface{}{json.Number("65535")}, []uint16{65535}},
		{"[]uint32", []interface{}{json.Number("1")}, []uint32{1}},
		{"[]uint64", []interface{}{json.Number("18446744073709551615")}, []uint64{math.MaxUint64}},
		{"[]float32", []interface{}{json.Number("0.5")}, []float32{0.5}},
		{"[]float64", []interface{}{json.Number("1e300")}, []float64{1e300}},
		{"[]bool", []interface{}{true, false}, []bool{true, false}},
		{"[]string", []interface{}{"x", "y"}, []string{"x", "y"}},
	}
	for _, tc := range tests {
		t.Run(tc.typ+"/"+formatValue(tc.value), func(t *testing.T) {
			t.Parallel()
			got, err := ReflectValue(tc.typ, tc.value)
			if err != nil {
				t.Fatalf("ReflectValue(%q, %#v): %v", tc.typ, tc.value, err)
			}
			if !reflect.DeepEqual(got.Interface(), tc.want) {
				t.Errorf("ReflectValue(%q, %#v) = %#v, want %#v", tc.typ, tc.value, got.Interface(), tc.want)
			}
		})
	}
}

// decodeJSON decodes data the way every consumer of messages does: with
// UseNumber.
func decodeJSON(t *testing.T, data []byte, v interface{}) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}

func TestReflectValueJSONRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range supportedValues {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()

			data, err := json.Marshal(Arg{Name: "a", Type: tc.typ, Value: tc.want})
			if err != nil {
				t.Fatal(err)
			}
			var arg Arg
			decodeJSON(t, data, &arg)
			got, err := ReflectValue(arg.Type, arg.Value)
			if err != nil {
				t.Fatalf("ReflectValue(%q, %#v) from %s: %v", arg.Type, arg.Value, data, err)
			}
			if !reflect.DeepEqual(got.Interface(), tc.want) {
				t.Errorf("Arg round trip through %s = %#v, want %#v", data, got.Interface(), tc.want)
			}

			data, err = json.Marshal(TaskResult{Type: tc.typ, Value: tc.want})
			if err != nil {
				t.Fatal(err)
			}
			var result TaskResult
			decodeJSON(t, data, &result)
			values, err := ReflectTaskResults([]*TaskResult{&result})
			if err != nil {
				t.Fatalf("ReflectTaskResults from %s: %v", data, err)
			}
			if !reflect.DeepEqual(values[0].Interface(), tc.want) {
				t.Errorf("TaskResult round trip through %s = %#v, want %#v", data, values[0].Interface(), tc.want)
			}
		})
	}
}

func TestReflectValueBytesAreBase64OnTheWire(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(Arg{Type: "[]byte", Value: []byte("hi!")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"Value":"aGkh"`) {
		t.Fatalf("encoding/json did not write []byte as base64: %s", data)
	}
	for _, typ := range []string{"[]byte", "[]uint8"} {
		got, err := ReflectValue(typ, "aGkh")
		if err != nil {
			t.Fatalf("ReflectValue(%q, base64): %v", typ, err)
		}
		if want := []byte("hi!"); !reflect.DeepEqual(got.Interface(), want) {
			t.Errorf("ReflectValue(%q, \"aGkh\") = %#v, want %#v", typ, got.Interface(), want)
		}
	}
}

func TestReflectValueAcceptsAnyNumericKindThatFits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		typ   string
		value interface{}
		want  interface{}
	}{
		{"int into int64", "int64", 1, int64(1)},
		{"int into int8", "int8", 127, int8(127)},
		{"uint8 into int", "int", uint8(200), 200},
		{"uint64 into int64", "int64", uint64(math.MaxInt64), int64(math.MaxInt64)},
		{"float64 1.0 into int64", "int64", 1.0, int64(1)},
		{"float32 into int16", "int16", float32(-3), int16(-3)},
		{"duration into int64", "int64", time.Second, int64(time.Second)},
		{"int into uint", "uint", 7, uint(7)},
		{"float64 into uint8", "uint8", 255.0, uint8(255)},
		{"int into float64", "float64", 1 << 53, float64(1 << 53)},
		{"int into float32", "float32", 1 << 24, float32(1 << 24)},
		{"uint64 into float64", "float64", uint64(1 << 63), float64(1 << 63)},
		{"float64 into float32", "float32", 0.5, float32(0.5)},
		{"float32 into float64", "float64", float32(0.25), 0.25},
		{"max float32 as float64", "float32", float64(math.MaxFloat32), float32(math.MaxFloat32)},
		{"[]int into []int64", "[]int64", []int{1, 2}, []int64{1, 2}},
		{"array into []uint16", "[]uint16", [2]int8{1, 2}, []uint16{1, 2}},
		{"[]float64 into []int", "[]int", []float64{1, 2}, []int{1, 2}},
		{"[]string into []string", "[]string", []string{"a"}, []string{"a"}},
		{"[]interface{} into []float32", "[]float32", []interface{}{1, 0.5, json.Number("2")}, []float32{1, 0.5, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ReflectValue(tc.typ, tc.value)
			if err != nil {
				t.Fatalf("ReflectValue(%q, %#v): %v", tc.typ, tc.value, err)
			}
			if !reflect.DeepEqual(got.Interface(), tc.want) {
				t.Errorf("ReflectValue(%q, %#v) = %#v, want %#v", tc.typ, tc.value, got.Interface(), tc.want)
			}
		})
	}
}

func TestReflectValueSlices(t *testing.T) {
	t.Parallel()

	t.Run("nil gives an empty non-nil slice", func(t *testing.T) {
		t.Parallel()
		for typ, want := range typesMap {
			if want.Kind() != reflect.Slice {
				continue
			}
			got, err := ReflectValue(typ, nil)
			if err != nil {
				t.Fatalf("ReflectValue(%q, nil): %v", typ, err)
			}
			if got.Type() != want || got.IsNil() || got.Len() != 0 {
				t.Errorf("ReflectValue(%q, nil) = %#v, want an empty non-nil %s", typ, got.Interface(), want)
			}
		}
	})

	t.Run("a []byte value is copied", func(t *testing.T) {
		t.Parallel()
		in := []byte{1, 2, 3}
		got, err := ReflectValue("[]byte", in)
		if err != nil {
			t.Fatal(err)
		}
		in[0] = 9
		if want := []byte{1, 2, 3}; !reflect.DeepEqual(got.Interface(), want) {
			t.Errorf("result changed with its source: %v, want %v", got.Interface(), want)
		}
	})

	t.Run("a Go slice is copied", func(t *testing.T) {
		t.Parallel()
		in := []int64{1, 2}
		got, err := ReflectValue("[]int64", in)
		if err != nil {
			t.Fatal(err)
		}
		in[0] = 9
		if want := []int64{1, 2}; !reflect.DeepEqual(got.Interface(), want) {
			t.Errorf("result changed with its source: %v, want %v", got.Interface(), want)
		}
	})
}

// checkArgsError fails t unless err wraps ErrArgs and its message contains
// every one of parts.
func checkArgsError(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	if !errors.Is(err, ErrArgs) {
		t.Errorf("error %q does not wrap ErrArgs", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func TestReflectValueOverflow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ   string
		value interface{}
	}{
		{"int8", 128},
		{"int8", -129},
		{"int8", json.Number("128")},
		{"int16", 32768},
		{"int16", json.Number("-32769")},
		{"int32", int64(math.MaxInt32 + 1)},
		{"int32", json.Number("-2147483649")},
		{"int64", uint64(math.MaxInt64 + 1)},
		{"int64", json.Number("9223372036854775808")},
		{"int64", 1e19},
		{"int", json.Number("9223372036854775808")},
		{"int", uint64(math.MaxUint64)},
		{"uint8", 256},
		{"uint8", json.Number("256")},
		{"uint16", 65536},
		{"uint16", json.Number("65536")},
		{"uint32", uint64(math.MaxUint32 + 1)},
		{"uint32", json.Number("4294967296")},
		{"uint64", json.Number("18446744073709551616")},
		{"uint64", 2e19},
		{"uint", json.Number("18446744073709551616")},
		{"float32", 1e39},
		{"float32", json.Number("1e39")},
		{"float32", -math.MaxFloat64},
		{"float64", json.Number("1e400")},
		{"[]int8", []interface{}{json.Number("1"), json.Number("300")}},
		{"[]uint8", []int{256}},
	}
	for _, tc := range tests {
		t.Run(tc.typ+"/"+formatValue(tc.value), func(t *testing.T) {
			t.Parallel()
			_, err := ReflectValue(tc.typ, tc.value)
			checkArgsError(t, err, " is not "+tc.typ, "overflows")
		})
	}
}

func TestReflectValueNegativeIntoUint(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"uint", "uint8", "uint16", "uint32", "uint64", "[]uint"} {
		for _, value := range []interface{}{-1, int8(-1), json.Number("-1"), -1.0, json.Number("-99999999999999999999")} {
			if strings.HasPrefix(typ, "[]") {
				value = []interface{}{value}
			}
			_, err := ReflectValue(typ, value)
			checkArgsError(t, err, "is not "+typ, "negative")
		}
	}
}

func TestReflectValueNotAnInteger(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ   string
		value interface{}
		why   string
	}{
		{"int", 1.5, "not an integer"},
		{"int64", json.Number("1.5"), "not an integer"},
		{"uint32", float32(0.5), "not an integer"},
		{"int", math.NaN(), "not an integer"},
		{"int", math.Inf(1), "not an integer"},
		{"int64", json.Number("1e3"), "written as a float"},
		{"int64", json.Number("2.0"), "written as a float"},
		{"int", json.Number("NaN"), "not a valid JSON number"},
		{"uint", json.Number("0x10"), "not a valid JSON number"},
		{"float64", json.Number("Inf"), "not a valid JSON number"},
		{"float64", 1<<53 + 1, "cannot hold it exactly"},
		{"float32", 1<<24 + 1, "cannot hold it exactly"},
		{"float64", uint64(math.MaxUint64), "cannot hold it exactly"},
	}
	for _, tc := range tests {
		t.Run(tc.typ+"/"+formatValue(tc.value), func(t *testing.T) {
			t.Parallel()
			_, err := ReflectValue(tc.typ, tc.value)
			checkArgsError(t, err, " is not "+tc.typ+": ", tc.why)
		})
	}
}

func TestReflectValueWrongKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		typ   string
		value interface{}
		msg   string
	}{
		{"string into int", "int", "1", `"1" is not int: it is of type string`},
		{"number into bool", "bool", json.Number("1"), "1 is not bool: it is a number"},
		{"Go int into bool", "bool", 1, "1 is not bool: it is of type int"},
		{"bool into string", "string", true, "true is not string: it is of type bool"},
		{"number into string", "string", json.Number("5"), "5 is not string: it is a number"},
		{"null into int64", "int64", nil, "<nil> is not int64: it is null"},
		{"map into []int", "[]int", map[string]interface{}{"a": 1}, "map[a:1] is not []int: it is of type map[string]interface {}"},
		{"scalar into []int", "[]int", json.Number("1"), "1 is not []int: it is a number"},
		{"string into []int", "[]int", "abc", `"abc" is not []int: it is of type string`},
		{"bad element", "[]int", []interface{}{json.Number("1"), "x"}, `[1 x] is not []int: element 1: "x" is not int: it is of type string`},
		{"null element", "[]string", []interface{}{nil}, "[<nil>] is not []string: element 0: <nil> is not string: it is null"},
		{"bad base64", "[]byte", "not base64!", `"not base64!" is not []uint8: it is not standard base64`},
		{"number into []byte", "[]byte", json.Number("5"), "5 is not []uint8: it is a number"},
		{"pointer into int", "int", new(int), "is not int: it is of type *int"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ReflectValue(tc.typ, tc.value)
			checkArgsError(t, err, "tasks: arguments do not fit the task function: ", tc.msg)
		})
	}
}

func TestReflectValueCutsLongValues(t *testing.T) {
	t.Parallel()
	_, err := ReflectValue("int", strings.Repeat("é", 1000))
	checkArgsError(t, err, "…")
	if len(err.Error()) > 200 {
		t.Errorf("error of %d bytes quotes the whole value: %q", len(err.Error()), err)
	}
}

func TestReflectValueUnsupportedType(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"map", "time.Time", "", "[][]int", "interface {}", "*int", "[]interface {}", "map[string]interface {}", "complex128", "uintptr", "[2]int", " int"} {
		_, err := ReflectValue(typ, json.Number("1"))
		var unsupported ErrUnsupportedType
		if !errors.As(err, &unsupported) {
			t.Errorf("ReflectValue(%q) error = %v, want an ErrUnsupportedType", typ, err)
			continue
		}
		if want := typ + " is not one of supported types"; err.Error() != want {
			t.Errorf("ReflectValue(%q) error = %q, want %q", typ, err, want)
		}
	}
}

func TestIsContextType(t *testing.T) {
	t.Parallel()
	type myContext interface{ context.Context }
	tests := []struct {
		name string
		typ  reflect.Type
		want bool
	}{
		{"context.Context", reflect.TypeFor[context.Context](), true},
		{"a concrete context", reflect.TypeOf(context.Background()), false},
		{"*context.Context", reflect.TypeFor[*context.Context](), false},
		{"an interface embedding it", reflect.TypeFor[myContext](), false},
		{"interface{}", reflect.TypeFor[interface{}](), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		if got := IsContextType(tc.typ); got != tc.want {
			t.Errorf("IsContextType(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReflectTaskResults(t *testing.T) {
	t.Parallel()
	type point struct{ X, Y int }
	results := []*TaskResult{
		{Type: "int64", Value: json.Number("5")},
		{Type: "[]string", Value: []interface{}{"a"}},
		{Type: "map[string]interface {}", Value: map[string]interface{}{"k": json.Number("1")}},
		{Type: "tasks.point", Value: point{1, 2}},
		{Type: "*tasks.point", Value: nil},
		nil,
	}
	values, err := ReflectTaskResults(results)
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{
		int64(5),
		[]string{"a"},
		map[string]interface{}{"k": json.Number("1")},
		point{1, 2},
		nil,
		nil,
	}
	if len(values) != len(want) {
		t.Fatalf("got %d values, want %d", len(values), len(want))
	}
	for i, v := range values {
		if !v.IsValid() {
			t.Errorf("value %d is the zero reflect.Value", i)
			continue
		}
		if got := v.Interface(); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("value %d = %#v, want %#v", i, got, want[i])
		}
	}

	empty, err := ReflectTaskResults(nil)
	if err != nil || empty == nil || len(empty) != 0 {
		t.Errorf("ReflectTaskResults(nil) = %#v, %v; want an empty non-nil slice", empty, err)
	}

	_, err = ReflectTaskResults([]*TaskResult{{Type: "int64", Value: json.Number("1")}, {Type: "int8", Value: json.Number("300")}})
	checkArgsError(t, err, "result 1", "300 is not int8: it overflows int8")
}

func TestHumanReadableResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		results []reflect.Value
		want    string
	}{
		{"one", []reflect.Value{reflect.ValueOf(int64(5))}, "5"},
		{"one slice", []reflect.Value{reflect.ValueOf([]string{"a", "b"})}, "[a b]"},
		{"several", []reflect.Value{reflect.ValueOf(1), reflect.ValueOf("a"), reflect.ValueOf(true)}, "[1, a, true]"},
		{"none", nil, "[]"},
		{"zero Value alone", []reflect.Value{{}}, "<nil>"},
		{"zero Value among others", []reflect.Value{reflect.ValueOf(1), {}}, "[1, <nil>]"},
		{"nil interface", []reflect.Value{nilValue()}, "<nil>"},
	}
	for _, tc := range tests {
		if got := HumanReadableResults(tc.results); got != tc.want {
			t.Errorf("%s: HumanReadableResults = %q, want %q", tc.name, got, tc.want)
		}
	}

	// Results as they come back from a backend print the same way.
	values, err := ReflectTaskResults([]*TaskResult{{Type: "int64", Value: json.Number("3")}, {Type: "string", Value: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := HumanReadableResults(values), "[3, x]"; got != want {
		t.Errorf("HumanReadableResults of reflected results = %q, want %q", got, want)
	}
}
