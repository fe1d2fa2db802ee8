package periodic

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// "@every D" ticks at the multiples of D since the Unix epoch, whenever the
// process started.
func TestPeriodicEveryTicksOnTheEpoch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		every time.Duration
		from  time.Time
		want  time.Time
	}{
		{time.Minute, start, start.Add(time.Minute)},
		{time.Minute, start.Add(17 * time.Second), start.Add(time.Minute)},
		{time.Minute, start.Add(time.Minute - time.Nanosecond), start.Add(time.Minute)},
		{time.Hour, start.Add(90 * time.Minute), start.Add(2 * time.Hour)},
		{7 * time.Second, time.Unix(1704067201, 0), time.Unix(1704067204, 0)}, // 1704067204 = 7 × 243438172
		{7 * time.Second, time.Unix(-5, 0), time.Unix(0, 0)},
	} {
		if got := everyAligned(tc.every).Next(tc.from); !got.Equal(tc.want) {
			t.Errorf("every %v after %v: %v, want %v", tc.every, tc.from.UTC(), got.UTC(), tc.want.UTC())
		}
	}
	// Through the scheduler: a spec under a second is one second, as
	// cron rounds it.
	sc, clk := newScheduler(t, start.Add(300*time.Millisecond))
	if err := sc.add("@every 500ms", "half", entryInfo{}, func(context.Context, Tick) error { return nil }); err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk)
	if at, _ := clk.NextDeadline(); !at.Equal(start.Add(time.Second)) {
		t.Errorf("@every 500ms from %v waits until %v, want the next second", start.Add(300*time.Millisecond), at)
	}
}

// A tick's tasks get UUIDs derived from the tick and their place: the same
// in every process, new at every tick, never the registered one.
func TestPeriodicTickUUIDs(t *testing.T) {
	t.Parallel()
	sig := &tasks.Signature{
		UUID: "fixed", Name: "a",
		OnSuccess: []*tasks.Signature{{UUID: "fixed-s", Name: "s"}},
		OnError:   []*tasks.Signature{{Name: "e"}},
	}
	t1 := Tick{Key: "periodic:x:@every 1m:60"}
	t2 := Tick{Key: "periodic:x:@every 1m:120"}
	uuids := func(tk Tick) []string {
		c := tk.copies("", sig, sig)
		return []string{c[0].UUID, c[0].OnSuccess[0].UUID, c[0].OnError[0].UUID, c[1].UUID}
	}
	a, again, other := uuids(t1), uuids(t1), uuids(t2)
	seen := map[string]bool{}
	for i := range a {
		if a[i] != again[i] {
			t.Errorf("place %d: %s, then %s for the same tick", i, a[i], again[i])
		}
		if !strings.HasPrefix(a[i], "task_") || seen[a[i]] || seen[other[i]] || a[i] == other[i] {
			t.Errorf("place %d: %s and %s for two ticks, want task_ UUIDs distinct across places and ticks", i, a[i], other[i])
		}
		seen[a[i]], seen[other[i]] = true, true
	}
	if sig.UUID != "fixed" || sig.OnError[0].UUID != "" {
		t.Error("copies changed the registered signature")
	}
	g1, err := t1.group(sig, sig)
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := t1.group(sig, sig)
	if !strings.HasPrefix(g1.GroupUUID, "group_") || g1.GroupUUID != g2.GroupUUID || g1.Tasks[1].GroupUUID != g1.GroupUUID || g1.Tasks[1].GroupTaskCount != 2 {
		t.Errorf("group %s (members' %s, count %d), then %s: want one group_ UUID per tick on every member",
			g1.GroupUUID, g1.Tasks[1].GroupUUID, g1.Tasks[1].GroupTaskCount, g2.GroupUUID)
	}
}
