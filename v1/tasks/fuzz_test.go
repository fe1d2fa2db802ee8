package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// decodeUseNumber decodes data as every consumer of messages does.
func decodeUseNumber(data []byte) (interface{}, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v interface{}
	err := dec.Decode(&v)
	return v, err
}

// checkReflectValue calls ReflectValue and checks what it promises: a
// value of the named type or an error of the documented kind, and a value
// that survives a JSON round trip unchanged.
func checkReflectValue(t *testing.T, typ string, value interface{}) {
	t.Helper()
	got, err := ReflectValue(typ, value)
	want, supported := typesMap[typ]
	if err != nil {
		var unsupported ErrUnsupportedType
		switch {
		case !supported && !errors.As(err, &unsupported):
			t.Fatalf("ReflectValue(%q, %#v) = %v, want an ErrUnsupportedType", typ, value, err)
		case supported && !errors.Is(err, ErrArgs):
			t.Fatalf("ReflectValue(%q, %#v) = %v, want an error wrapping ErrArgs", typ, value, err)
		}
		return
	}
	if !supported {
		t.Fatalf("ReflectValue(%q, %#v) succeeded for an unsupported type", typ, value)
	}
	if got.Type() != want {
		t.Fatalf("ReflectValue(%q, %#v) has type %s", typ, value, got.Type())
	}
	data, err := json.Marshal(got.Interface())
	if err != nil {
		return // NaN and infinities, which only Go values carry, have no JSON.
	}
	decoded, err := decodeUseNumber(data)
	if err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	again, err := ReflectValue(typ, decoded)
	if err != nil {
		t.Fatalf("ReflectValue(%q, %s) after a round trip of %#v: %v", typ, data, got.Interface(), err)
	}
	if !reflect.DeepEqual(again.Interface(), got.Interface()) {
		t.Fatalf("ReflectValue(%q) round trip through %s: %#v, then %#v", typ, data, got.Interface(), again.Interface())
	}
}

func FuzzReflectValue(f *testing.F) {
	for _, tc := range supportedValues {
		data, err := json.Marshal(tc.want)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tc.typ, data)
	}
	seeds := []struct{ typ, json string }{
		{"int8", "300"},
		{"int64", "9223372036854775808"},
		{"uint", "-1"},
		{"uint", "-0"},
		{"int", "1.5"},
		{"int", "1e3"},
		{"float32", "1e39"},
		{"float64", "1e400"},
		{"bool", "1"},
		{"string", "true"},
		{"[]int", `{"a":1}`},
		{"[]int", `[1,"x",null]`},
		{"[]byte", `"aGkh"`},
		{"[]byte", `"not base64"`},
		{"[]uint8", `[1,2,256]`},
		{"[]string", "null"},
		{"map", "{}"},
		{"", "1"},
		{"[][]int", "[[1]]"},
	}
	for _, s := range seeds {
		f.Add(s.typ, []byte(s.json))
	}
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		value, err := decodeUseNumber(data)
		if err != nil {
			return
		}
		checkReflectValue(t, typ, value)
	})
}

func FuzzDecodeSignature(f *testing.F) {
	f.Add([]byte(machineryWireExample))
	f.Add([]byte(`{"Name":"add","Args":[{"Type":"int64","Value":1},{"Type":"int64","Value":"x"}]}`))
	f.Add([]byte(`{"Name":"b","Args":[{"Type":"[]byte","Value":"aGkh"},{"Type":"[]float32","Value":[1e39]},{"Type":"map","Value":{}}]}`))
	f.Add([]byte(`{"Name":"n","ETA":"2030-01-01T00:00:00Z","OnSuccess":[{"Name":"m","Args":[{"Type":"uint8","Value":-1}]}],"Headers":{"a":[1,{"b":null}]}}`))
	f.Add([]byte(`{"Name":"x"} trailing`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		sig, err := DecodeSignature(data)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("DecodeSignature error %v does not wrap ErrDecode", err)
			}
			if sig != nil {
				t.Fatal("DecodeSignature returned a signature along with an error")
			}
			return
		}
		if sig.Validate() != nil {
			t.Fatalf("DecodeSignature returned an invalid signature: %v", sig.Validate())
		}
		for _, arg := range sig.Args {
			checkReflectValue(t, arg.Type, arg.Value)
		}
		for _, s := range sig.OnSuccess {
			if s != nil {
				for _, arg := range s.Args {
					checkReflectValue(t, arg.Type, arg.Value)
				}
			}
		}
		// What was decoded encodes and decodes again to the same signature.
		encoded, err := EncodeSignature(sig)
		if err != nil {
			t.Fatalf("EncodeSignature of a decoded signature: %v", err)
		}
		again, err := DecodeSignature(encoded)
		if err != nil {
			t.Fatalf("DecodeSignature(EncodeSignature(sig)) = %v for %s", err, encoded)
		}
		reencoded, err := EncodeSignature(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(encoded, reencoded) {
			t.Fatalf("encoding is not stable:\n%s\n%s", encoded, reencoded)
		}
		// machinery's shape, json.Marshal's, decodes to the same signature.
		full, err := json.Marshal(sig)
		if err != nil {
			t.Fatalf("json.Marshal of a decoded signature: %v", err)
		}
		fromFull, err := DecodeSignature(full)
		if err != nil {
			t.Fatalf("DecodeSignature(json.Marshal(sig)) = %v for %s", err, full)
		}
		if again, err := EncodeSignature(fromFull); err != nil || !bytes.Equal(again, encoded) {
			t.Fatalf("json.Marshal's shape decodes to another signature:\n%s\n%s (%v)", encoded, again, err)
		}
	})
}
