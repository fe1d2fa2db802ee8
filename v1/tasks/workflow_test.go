package tasks

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func sigs(names ...string) []*Signature {
	out := make([]*Signature, len(names))
	for i, n := range names {
		out[i] = &Signature{Name: n}
	}
	return out
}

func TestNewChain(t *testing.T) {
	t.Parallel()
	s := sigs("a", "b", "c")
	s[1].UUID = "task_fixed"
	chain, err := NewChain(s...)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain.Tasks) != 3 {
		t.Fatalf("chain has %d tasks, want 3", len(chain.Tasks))
	}
	for i, task := range chain.Tasks {
		if task != s[i] {
			t.Errorf("chain task %d is not the signature passed", i)
		}
		if !strings.HasPrefix(task.UUID, "task_") {
			t.Errorf("chain task %d UUID = %q, want a task_ prefix", i, task.UUID)
		}
	}
	if s[1].UUID != "task_fixed" {
		t.Errorf("NewChain replaced an existing UUID with %q", s[1].UUID)
	}
	if s[0].UUID == s[2].UUID {
		t.Error("two chain tasks got the same UUID")
	}
	if len(s[0].OnSuccess) != 1 || s[0].OnSuccess[0] != s[1] {
		t.Errorf("a.OnSuccess = %v, want [b]", s[0].OnSuccess)
	}
	if len(s[1].OnSuccess) != 1 || s[1].OnSuccess[0] != s[2] {
		t.Errorf("b.OnSuccess = %v, want [c]", s[1].OnSuccess)
	}
	if s[2].OnSuccess != nil {
		t.Errorf("c.OnSuccess = %v, want none", s[2].OnSuccess)
	}
	if err := chain.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

func TestNewGroup(t *testing.T) {
	t.Parallel()
	s := sigs("a", "b")
	group, err := NewGroup(s...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(group.GroupUUID, "group_") {
		t.Errorf("GroupUUID = %q, want a group_ prefix", group.GroupUUID)
	}
	for i, task := range group.Tasks {
		if task.GroupUUID != group.GroupUUID || task.GroupTaskCount != 2 {
			t.Errorf("task %d has GroupUUID %q and GroupTaskCount %d, want %q and 2", i, task.GroupUUID, task.GroupTaskCount, group.GroupUUID)
		}
		if !strings.HasPrefix(task.UUID, "task_") {
			t.Errorf("task %d UUID = %q, want a task_ prefix", i, task.UUID)
		}
	}
	uuids := group.GetUUIDs()
	if len(uuids) != 2 || uuids[0] != s[0].UUID || uuids[1] != s[1].UUID {
		t.Errorf("GetUUIDs = %v", uuids)
	}
	if err := group.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
	other, err := NewGroup(sigs("c")...)
	if err != nil {
		t.Fatal(err)
	}
	if other.GroupUUID == group.GroupUUID {
		t.Error("two groups got the same GroupUUID")
	}
}

func TestNewChord(t *testing.T) {
	t.Parallel()
	group, err := NewGroup(sigs("a", "b")...)
	if err != nil {
		t.Fatal(err)
	}
	callback := &Signature{Name: "cb"}
	chord, err := NewChord(group, callback)
	if err != nil {
		t.Fatal(err)
	}
	if chord.Callback != callback || chord.Group != group {
		t.Error("the chord does not hold the group and callback passed")
	}
	if !strings.HasPrefix(callback.UUID, "chord_") {
		t.Errorf("callback UUID = %q, want a chord_ prefix", callback.UUID)
	}
	for i, task := range group.Tasks {
		if task.ChordCallback != callback {
			t.Errorf("task %d ChordCallback = %v, want the callback", i, task.ChordCallback)
		}
	}
	if err := chord.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}

	named := &Signature{UUID: "task_cb", Name: "cb"}
	if _, err := NewChord(group, named); err != nil || named.UUID != "task_cb" {
		t.Errorf("NewChord replaced the callback's UUID with %q (err %v)", named.UUID, err)
	}
}

func TestWorkflowErrors(t *testing.T) {
	t.Parallel()
	group, err := NewGroup(sigs("a")...)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
		msg  string
	}{
		{"empty chain", second(NewChain()), ErrEmptyWorkflow, ""},
		{"empty group", second(NewGroup()), ErrEmptyWorkflow, ""},
		{"nil chord group", second(NewChord(nil, &Signature{Name: "cb"})), ErrEmptyWorkflow, ""},
		{"empty chord group", second(NewChord(&Group{}, &Signature{Name: "cb"})), ErrEmptyWorkflow, ""},
		{"nil chain member", second(NewChain(&Signature{Name: "a"}, nil)), ErrNilSignature, "task 1: "},
		{"nil group member", second(NewGroup(nil)), ErrNilSignature, "task 0: "},
		{"nameless chain member", second(NewChain(&Signature{UUID: "task_x"})), ErrEmptyTaskName, `task 0: `},
		{"nil chord callback", second(NewChord(group, nil)), ErrNilSignature, "chord callback: "},
		{"group without UUID", (&Group{Tasks: sigs("a")}).Validate(), ErrEmptyGroupUUID, ""},
		{"nil chain", (*Chain)(nil).Validate(), ErrEmptyWorkflow, ""},
		{"chord without group", (&Chord{Callback: &Signature{Name: "cb"}}).Validate(), ErrEmptyWorkflow, ""},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, tc.err, tc.want)
		}
		if tc.err != nil && !strings.Contains(tc.err.Error(), tc.msg) {
			t.Errorf("%s: error %q, want it to contain %q", tc.name, tc.err, tc.msg)
		}
	}
	if len(group.Tasks[0].OnSuccess) != 0 || group.Tasks[0].ChordCallback != nil {
		t.Error("a failed NewChord changed the group")
	}
}

func second[T any](_ T, err error) error { return err }

// NewWorkflowMeta records what sends each task, so that the workflow's
// graph can be drawn.
func TestWorkflowMetaFollows(t *testing.T) {
	t.Parallel()
	step := func(name, queue string) *Signature {
		return &Signature{UUID: name + "_id", Name: name, RoutingKey: queue}
	}
	chain, err := NewChain(step("a", "q"), step("b", "q"), step("c", "other"))
	if err != nil {
		t.Fatal(err)
	}
	wf := NewWorkflowMeta("chain_1", WorkflowChain, chain.Tasks...)
	var got []string
	for _, task := range wf.Tasks {
		got = append(got, task.UUID+"<"+task.Follows)
	}
	if want := []string{"a_id<", "b_id<a_id", "c_id<b_id"}; !slices.Equal(got, want) {
		t.Fatalf("chain: %q, want %q", got, want)
	}

	for _, queues := range [][]string{{"q", "q"}, {"q", "other"}} {
		m1, m2 := step("m1", queues[0]), step("m2", queues[1])
		done := step("done", "q")
		m1.OnSuccess = []*Signature{done}
		callback, after := step("sum", "q"), step("after", "q")
		callback.OnSuccess = []*Signature{after}
		group, err := NewGroup(m1, m2)
		if err != nil {
			t.Fatal(err)
		}
		chord, err := NewChord(group, callback)
		if err != nil {
			t.Fatal(err)
		}
		wf := NewWorkflowMeta(chord.Group.GroupUUID, WorkflowChord, chord.Group.Tasks...)
		got = got[:0]
		for _, task := range wf.Tasks {
			got = append(got, task.UUID+"<"+task.Follows)
		}
		want := []string{"done_id<m1_id", "sum_id<" + chord.Group.GroupUUID, "after_id<sum_id"}
		if queues[1] != queues[0] {
			want = []string{"m1_id<", "done_id<m1_id", "m2_id<", "sum_id<" + chord.Group.GroupUUID, "after_id<sum_id"}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("chord over queues %v: %q, want %q", queues, got, want)
		}
	}
}
