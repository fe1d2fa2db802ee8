package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNewSignature(t *testing.T) {
	t.Parallel()
	args := []Arg{{Type: "int64", Value: 1}}
	sig, err := NewSignature("add", args)
	if err != nil {
		t.Fatal(err)
	}
	if sig.Name != "add" || !reflect.DeepEqual(sig.Args, args) || !strings.HasPrefix(sig.UUID, "task_") || len(sig.UUID) != len("task_")+36 {
		t.Errorf("NewSignature = %+v", sig)
	}
	if _, err := NewSignature("", nil); err != ErrEmptyTaskName {
		t.Errorf("NewSignature(\"\") = %v, want ErrEmptyTaskName", err)
	}
}

func TestCopySignatureIsDeep(t *testing.T) {
	t.Parallel()
	eta := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	callback := &Signature{UUID: "chord_1", Name: "cb", Args: []Arg{{Type: "[]int", Value: []int{1}}}}
	newOriginal := func() *Signature {
		return &Signature{
			UUID: "task_1",
			Name: "orig",
			ETA:  &eta,
			Args: []Arg{
				{Type: "[]int64", Value: []interface{}{int64(1), []interface{}{"nested"}}},
				{Type: "[]byte", Value: []byte("ab")},
				{Type: "string", Value: "s"},
			},
			Headers:       Headers{"k": "v", "m": map[string]interface{}{"x": "y"}},
			OnSuccess:     []*Signature{{UUID: "task_2", Name: "next", Args: []Arg{{Type: "string", Value: "n"}}}},
			OnError:       []*Signature{{UUID: "task_3", Name: "onerr"}},
			ChordCallback: callback,
			Limit:         &Limit{Key: "k", Concurrency: 2},
		}
	}
	orig := newOriginal()
	c := CopySignature(orig)
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("copy differs from the original:\n%+v\n%+v", c, orig)
	}

	c.Name = "changed"
	*c.ETA = eta.Add(time.Hour)
	c.Args[0].Value.([]interface{})[0] = int64(99)
	c.Args[0].Value.([]interface{})[1].([]interface{})[0] = "changed"
	c.Args[1].Value.([]byte)[0] = 'z'
	c.Args[2].Type = "int"
	c.Args = append(c.Args[:1], Arg{})
	c.Headers["k"] = "changed"
	c.Headers["m"].(map[string]interface{})["x"] = "changed"
	c.Headers["new"] = "x"
	c.OnSuccess[0].Name = "changed"
	c.OnSuccess[0].Args[0].Value = "changed"
	c.OnSuccess = append(c.OnSuccess, &Signature{Name: "more"})
	c.OnError[0].Name = "changed"
	c.ChordCallback.Name = "changed"
	c.ChordCallback.Args[0].Value.([]int)[0] = 99
	c.Limit.Concurrency = 9

	if want := newOriginal(); !reflect.DeepEqual(orig, want) {
		t.Errorf("changing the copy changed the original:\n got %+v\nwant %+v", orig, want)
	}
	if callback.Name != "cb" || callback.Args[0].Value.([]int)[0] != 1 {
		t.Errorf("changing the copy changed the chord callback: %+v", callback)
	}

	if CopySignature(nil) != nil {
		t.Error("CopySignature(nil) is not nil")
	}
	copies := CopySignatures(orig, nil)
	if len(copies) != 2 || copies[0] == orig || copies[0].Name != "orig" || copies[1] != nil {
		t.Errorf("CopySignatures = %+v", copies)
	}
}

func TestSignatureValidate(t *testing.T) {
	t.Parallel()
	var nilSig *Signature
	if err := nilSig.Validate(); err != ErrNilSignature {
		t.Errorf("nil.Validate() = %v, want ErrNilSignature", err)
	}
	if err := (&Signature{UUID: "task_x"}).Validate(); err == nil || !strings.Contains(err.Error(), `UUID "task_x"`) {
		t.Errorf("Validate without a name = %v, want an error naming the UUID", err)
	}
	if err := (&Signature{Name: "n"}).Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

// A limit needs a key and a concurrency or a rate (with its period), none
// negative; an aggregation member cannot have one (its aggregate can).
func TestLimitValidate(t *testing.T) {
	t.Parallel()
	for _, l := range []Limit{
		{Key: "k", Concurrency: 1},
		{Key: "k", Rate: 10, Per: time.Second},
		{Key: "k", Concurrency: 3, Rate: 1, Per: time.Millisecond},
	} {
		if err := (&Signature{Name: "n", Limit: &l}).Validate(); err != nil {
			t.Errorf("Validate with limit %+v: %v", l, err)
		}
	}
	for _, l := range []Limit{
		{Concurrency: 1},
		{Key: "k"},
		{Key: "k", Concurrency: -1},
		{Key: "k", Rate: -1, Per: time.Second},
		{Key: "k", Rate: 1},
		{Key: "k", Rate: 1, Per: time.Microsecond},
		{Key: "k", Concurrency: 1, Per: time.Second},
	} {
		if err := (&Signature{Name: "n", Limit: &l}).Validate(); !errors.Is(err, ErrBadLimit) {
			t.Errorf("Validate with limit %+v: %v, want ErrBadLimit", l, err)
		}
	}
	member := &Signature{Name: "n", AggregationKey: "a", Limit: &Limit{Key: "k", Concurrency: 1}}
	if err := member.Validate(); !errors.Is(err, ErrAggregationMember) {
		t.Errorf("Validate of a limited aggregation member: %v, want ErrAggregationMember", err)
	}
}

// An aggregation member runs only inside its aggregate: callbacks of its own,
// or a place in a chain, group or chord, would never run, and are refused.
func TestAggregationMembersHaveNoWorkflow(t *testing.T) {
	t.Parallel()
	member := func() *Signature { return &Signature{Name: "notify", AggregationKey: "alice"} }
	if err := member().Validate(); err != nil {
		t.Fatalf("a plain member: %v", err)
	}
	withCallback := member()
	withCallback.OnSuccess = []*Signature{{Name: "next"}}
	asCallback := &Signature{Name: "first", OnError: []*Signature{member()}}
	chain, err := NewChain(&Signature{Name: "first"}, member())
	if err != nil {
		t.Fatal(err)
	}
	group, err := NewGroup(member(), &Signature{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	chordGroup, _ := NewGroup(member())
	chord, err := NewChord(chordGroup, &Signature{Name: "callback"})
	if err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"a member with an OnSuccess": withCallback.Validate(),
		"a member as an OnError":     asCallback.Validate(),
		"a member in a chain":        chain.Validate(),
		"a member in a group":        group.Validate(),
		"a member in a chord":        chord.Validate(),
	} {
		if !errors.Is(err, ErrAggregationMember) {
			t.Errorf("%s: %v, want ErrAggregationMember", what, err)
		}
	}
}

// machineryFields are the keys of machinery's Signature JSON, in its order.
var machineryFields = []string{
	"UUID", "Name", "RoutingKey", "ETA", "GroupUUID", "GroupTaskCount", "Args", "Headers",
	"Priority", "Immutable", "RetryCount", "RetryTimeout", "OnSuccess", "OnError", "ChordCallback",
	"BrokerMessageGroupId", "SQSReceiptHandle", "StopTaskDeletionOnError", "IgnoreWhenTaskNotRegistered",
}

// jsonKeys returns the keys of the JSON object data, in order.
func jsonKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s is no JSON object: %v", data, err)
	}
	var keys []string
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestSignatureJSONIsMachinerys: json.Marshal writes a signature as
// machinery does, every machinery field present, so that a program that
// puts one in its own JSON keeps its shape; machinist's fields follow
// only when set.
func TestSignatureJSONIsMachinerys(t *testing.T) {
	t.Parallel()
	sig, err := DecodeSignature([]byte(machineryWireExample))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := json.Marshal(sig); err != nil || string(got) != machineryWireExample {
		t.Errorf("json.Marshal of machinery's message decoded = %s, %v; want it unchanged:\n%s", got, err, machineryWireExample)
	}

	// A value in a struct of the program's is written the same way.
	type response struct {
		Task Signature
	}
	got, err := json.Marshal(response{Task: Signature{Name: "add", OnSuccess: []*Signature{{Name: "next"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var outer struct{ Task json.RawMessage }
	if err := json.Unmarshal(got, &outer); err != nil {
		t.Fatal(err)
	}
	if keys := jsonKeys(t, outer.Task); !reflect.DeepEqual(keys, machineryFields) {
		t.Errorf("keys of a signature in a struct = %v, want machinery's %v", keys, machineryFields)
	}
	var task struct{ OnSuccess []json.RawMessage }
	if err := json.Unmarshal(outer.Task, &task); err != nil {
		t.Fatal(err)
	}
	if keys := jsonKeys(t, task.OnSuccess[0]); !reflect.DeepEqual(keys, machineryFields) {
		t.Errorf("keys of a callback = %v, want machinery's %v", keys, machineryFields)
	}

	withOwn, err := json.Marshal(&Signature{Name: "add", Timeout: time.Second, WorkflowUUID: "chain_1"})
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]string(nil), machineryFields...), "Timeout", "WorkflowUUID")
	if keys := jsonKeys(t, withOwn); !reflect.DeepEqual(keys, want) {
		t.Errorf("keys with machinist's Timeout and WorkflowUUID set = %v, want %v", keys, want)
	}
}

// TestEncodeSignatureIsCompact: the store's encoding leaves out every
// empty field, in the callbacks too, so that a pending task takes no more
// memory in Redis than the fields it sets.
func TestEncodeSignatureIsCompact(t *testing.T) {
	t.Parallel()
	sig := &Signature{
		Name:      "add",
		Args:      []Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}},
		OnSuccess: []*Signature{{UUID: "task_b", Name: "next", Timeout: time.Second}},
	}
	got, err := EncodeSignature(sig)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"Name":"add","Args":[{"Name":"","Type":"int64","Value":1},{"Name":"","Type":"int64","Value":2}],` +
		`"OnSuccess":[{"UUID":"task_b","Name":"next","Timeout":1000000000}]}`
	if string(got) != want {
		t.Errorf("EncodeSignature = %s, want %s", got, want)
	}
	if got, err := EncodeSignature(nil); err != nil || string(got) != "null" {
		t.Errorf("EncodeSignature(nil) = %s, %v; want null", got, err)
	}

	cycle := &Signature{Name: "loop"}
	cycle.OnSuccess = []*Signature{cycle}
	if _, err := EncodeSignature(cycle); err == nil || !strings.Contains(err.Error(), "nest deeper than 1000") {
		t.Errorf("EncodeSignature of a cycle = %v, want an error saying it nests too deep", err)
	}
}

// TestSignatureEncodingsKeepEveryField: both encodings of a signature
// whose every field is set, in a callback too, decode to it.
func TestSignatureEncodingsKeepEveryField(t *testing.T) {
	t.Parallel()
	eta := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	full := func(name string) *Signature {
		return &Signature{
			UUID: "task_" + name, Name: name, RoutingKey: "q", ETA: &eta,
			GroupUUID: "group_1", GroupTaskCount: 2,
			Args:     []Arg{{Name: "a", Type: "string", Value: "x"}},
			Headers:  Headers{"k": "v"},
			Priority: 1, Immutable: true, RetryCount: 3, RetryTimeout: 5,
			BrokerMessageGroupId: "m", SQSReceiptHandle: "r",
			StopTaskDeletionOnError: true, IgnoreWhenTaskNotRegistered: true,
			Timeout: time.Second, AggregationKey: "agg",
			UniqueFor: time.Minute, UniqueKey: "u", UniqueReplace: true,
			WorkflowUUID: "chain_1", WorkflowNode: "1.0", WorkflowParents: []WorkflowParent{{Key: "0", UUID: "task_0"}},
			Limit: &Limit{Key: "l", Concurrency: 1, Rate: 2, Per: time.Second}, FairKey: "tenant",
		}
	}
	sig := full("a")
	sig.OnSuccess = []*Signature{full("b")}
	sig.OnError = []*Signature{full("c")}
	sig.ChordCallback = full("d")
	v := reflect.ValueOf(sig).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			t.Fatalf("the test's signature leaves %s unset: set it", v.Type().Field(i).Name)
		}
	}

	for name, encode := range map[string]func(*Signature) ([]byte, error){
		"EncodeSignature": EncodeSignature,
		"json.Marshal":    func(s *Signature) ([]byte, error) { return json.Marshal(s) },
	} {
		data, err := encode(sig)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var got *Signature
		if err := dec.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, sig) {
			t.Errorf("%s then decoding gave %+v, want %+v (from %s)", name, got, sig, data)
		}
	}
}
