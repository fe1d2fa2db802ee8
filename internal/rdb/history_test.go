package rdb

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// A day's counts are read back on their day, and their hash expires
// HistoryDays after the day ends, so no day outlives the window.
func TestQueueHistoryDaysExpire(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	now := time.Now()
	if err := s.addStats(ctx, []store.StatCount{{Queue: "q", At: now, Processed: 3, Failed: 1}}); err != nil {
		t.Fatal(err)
	}
	days, err := s.QueueHistory(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	// Found by its day, not as the last: midnight may pass meanwhile.
	i := slices.IndexFunc(days, func(d store.DayCount) bool { return d.Day.Equal(store.HistoryDay(now)) })
	if i < 0 || days[i].Processed != 3 || days[i].Failed != 1 {
		t.Fatalf("history %+v: want the day of %v with 3 processed, 1 failed", days, now)
	}
	at, err := client.PExpireTime(ctx, s.historyKey("q", now)).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := store.HistoryDay(now).AddDate(0, 0, store.HistoryDays+1)
	if got := time.UnixMilli(at.Milliseconds()); !got.Equal(want) {
		t.Fatalf("today's counts expire at %v; want %v", got, want)
	}
}
