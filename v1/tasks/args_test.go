package tasks

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestNewSignatureOf(t *testing.T) {
	sig, err := NewSignatureOf("resize", "img-1", 640, true, []byte("x"), []float64{1.5}, uint8(3))
	if err != nil {
		t.Fatal(err)
	}
	want := []Arg{{Type: "string", Value: "img-1"}, {Type: "int", Value: 640}, {Type: "bool", Value: true},
		{Type: "[]byte", Value: []byte("x")}, {Type: "[]float64", Value: []float64{1.5}}, {Type: "uint8", Value: uint8(3)}}
	if sig.Name != "resize" || sig.UUID == "" || !reflect.DeepEqual(sig.Args, want) {
		t.Fatalf("signature %+v, want args %+v", sig, want)
	}
	// Every supported type round-trips to its own name.
	for name, typ := range typesMap {
		a, err := ArgOf(reflect.Zero(typ).Interface())
		if err != nil || (a.Type != name && name != "[]uint8") {
			t.Errorf("ArgOf(a zero %s) = %+v, %v", name, a, err)
		}
	}
	type meters int
	for i, bad := range []any{meters(3), struct{}{}, map[string]int{}, nil, &sig} {
		_, err := NewSignatureOf("resize", "ok", bad)
		if !errors.Is(err, ErrArgs) || !strings.Contains(err.Error(), "argument 1") {
			t.Errorf("bad value %d (%T): %v, want ErrArgs naming argument 1", i, bad, err)
		}
	}
	if _, err := NewSignatureOf("", 1); !errors.Is(err, ErrEmptyTaskName) {
		t.Errorf("no name: %v", err)
	}
}
