package tasks

import (
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
