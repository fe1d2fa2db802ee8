package rdb

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
)

// machinery's layout under names unique to the test, on the shared server.
func machineryOn(t *testing.T) (*Machinery, string) {
	t.Helper()
	srv := redistest.Shared(t)
	m, err := DialMachinery(srv.URL(), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, srv.Prefix(t)
}

// MoveDue moves the due messages, and only those, each to the queue its
// RoutingKey names (else the default queue), in the order they were due;
// a second move finds nothing due.
func TestMachineryMoveDue(t *testing.T) {
	t.Parallel()
	m, p := machineryOn(t)
	ctx := context.Background()
	delayed, a, b := p+"delayed", p+"a", p+"b"
	msg := func(name, queue string) string {
		return `{"Name":"` + name + `","RoutingKey":"` + queue + `","Args":[{"Type":"int64","Value":12345678901234567890}]}`
	}
	a1, b1, a2, later := msg("a1", ""), msg("b1", b), msg("a2", a), msg("later", "")
	now := time.Now()
	for _, d := range []struct {
		msg string
		at  time.Duration
	}{{a1, -2 * time.Second}, {b1, -time.Second}, {a2, -time.Millisecond}, {later, time.Hour}} {
		if err := m.Delay(ctx, delayed, []byte(d.msg), now.Add(d.at)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the second finds nothing due
		if err := m.MoveDue(ctx, delayed, now, a); err != nil {
			t.Fatal(err)
		}
	}
	for q, want := range map[string][]string{a: {a1, a2}, b: {b1}, delayed: {later}} {
		list := m.List
		if q == delayed {
			list = m.ListDelayed
		}
		if got, err := list(ctx, q); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s holds %v (%v); want %v", q, got, err, want)
		}
	}
}

// Pop takes the head, PushFront puts a message back before it, and an
// empty queue gives nil once its wait (at least a second) has passed.
func TestMachineryPop(t *testing.T) {
	t.Parallel()
	m, p := machineryOn(t)
	ctx := context.Background()
	q := p + "q"
	for _, msg := range []string{"1", "2"} {
		if err := m.Push(ctx, q, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.Pop(ctx, q, time.Millisecond)
	if err != nil || string(got) != "1" {
		t.Fatalf("Pop = %q, %v; want 1", got, err)
	}
	if err := m.PushFront(ctx, q, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1", "2"} {
		if got, err := m.Pop(ctx, q, time.Millisecond); err != nil || string(got) != want {
			t.Fatalf("Pop = %q, %v; want %s", got, err, want)
		}
	}
	if got, err := m.Pop(ctx, q, time.Millisecond); err != nil || got != nil {
		t.Fatalf("Pop of an empty queue = %q, %v; want nil", got, err)
	}
}

// Lock excludes a second holder until the first releases it; the release
// of a lock someone else holds now deletes nothing.
func TestMachineryLock(t *testing.T) {
	t.Parallel()
	m, p := machineryOn(t)
	ctx := context.Background()
	key := p + "mutex"
	unlock, err := m.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := m.Lock(short, key); err == nil {
		t.Fatal("a held lock was taken again")
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	again, err := m.Lock(ctx, key)
	if err != nil {
		t.Fatalf("the released lock was not taken: %v", err)
	}
	if err := unlock(); err != nil { // the first holder's, released already
		t.Fatal(err)
	}
	if v, err := m.Get(ctx, key); err != nil || v == nil {
		t.Fatalf("a stale release deleted the second holder's lock (%v)", err)
	}
	if err := again(); err != nil {
		t.Fatal(err)
	}
}
