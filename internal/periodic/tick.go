package periodic

import (
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/b6192125/machinist/v1/tasks"
)

// periodicNamespace seeds the UUIDs derived for periodic ticks.
var periodicNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/b6192125/machinist/periodic"))

// keepLeases is, in leases, how long at least a tick is tried and its
// claim kept: keep = max(period, keepLeases × LeaseDuration).
const keepLeases = 10

// Tick is one tick of a periodic entry, as its send function sees it.
type Tick struct {
	// Key names the tick in the broker's claims and seeds its tasks'
	// UUIDs: periodic:<name>:<spec>:<tick in Unix seconds>.
	Key string
	At  time.Time
	// keep is how long after At the tick is tried, and its claim kept.
	keep time.Duration
	// resend is set when an earlier attempt at the tick may have sent it,
	// in part: on a look again, and on an attempt that took it over.
	resend bool
}

// UUID returns the UUID of the tick's signature at path, with prefix: the
// same in every process.
func (t Tick) UUID(prefix, path string) string {
	return prefix + uuid.NewSHA1(periodicNamespace, []byte(t.Key+"\x00"+path)).String()
}

// copies copies sigs for the tick: the copies and their callbacks get
// UUIDs derived from the tick and their place (under path), and no group.
func (t Tick) copies(path string, sigs ...*tasks.Signature) []*tasks.Signature {
	out := tasks.CopySignatures(sigs...)
	for i, s := range out {
		t.name(s, path+"/"+strconv.Itoa(i), 0)
	}
	return out
}

// name gives s and its callbacks the UUIDs of their places under path,
// down to a depth that only a cyclic signature reaches.
func (t Tick) name(s *tasks.Signature, path string, depth int) {
	if s == nil || depth > 1000 {
		return
	}
	s.UUID, s.GroupUUID, s.GroupTaskCount = t.UUID("task_", path), "", 0
	for i, cb := range s.OnSuccess {
		t.name(cb, path+"/s"+strconv.Itoa(i), depth+1)
	}
	for i, cb := range s.OnError {
		t.name(cb, path+"/e"+strconv.Itoa(i), depth+1)
	}
	if cb := s.ChordCallback; cb != nil {
		t.name(cb, path+"/c", depth+1)
		cb.UUID = t.UUID("chord_", path+"/c")
	}
}

// group makes the tick's group of copies of sigs, with a UUID derived from
// the tick.
func (t Tick) group(sigs ...*tasks.Signature) (*tasks.Group, error) {
	group, err := tasks.NewGroup(t.copies("", sigs...)...)
	if err != nil {
		return nil, err
	}
	group.GroupUUID = t.UUID("group_", "group")
	for _, m := range group.Tasks {
		m.GroupUUID = group.GroupUUID
	}
	return group, nil
}

// everyAligned is the schedule of "@every D": the multiples of D since the
// Unix epoch, which every process agrees on whenever it started (cron's
// ConstantDelaySchedule ticks D after each process's start).
type everyAligned time.Duration

// Next returns the first multiple of the interval after t.
func (d everyAligned) Next(t time.Time) time.Time {
	step, ns := int64(d), t.UnixNano()
	q := ns / step
	if ns%step < 0 {
		q-- // floor, before the epoch
	}
	return time.Unix(0, (q+1)*step).In(t.Location())
}

// newTick returns e's tick at.
func (sc *Scheduler) newTick(e *periodicEntry, at time.Time) Tick {
	period := e.schedule.Next(at).Sub(at)
	return Tick{
		Key:  fmt.Sprintf("periodic:%s:%s:%d", e.name, e.spec, at.Unix()),
		At:   at,
		keep: max(period, keepLeases*sc.leaseDuration()),
	}
}

// NextTick returns the first tick of spec after t, as a Scheduler computes
// it: the next run an operator sees listed.
func NextTick(spec string, t time.Time) (time.Time, error) {
	schedule, err := cron.ParseStandard(spec)
	if err != nil {
		return time.Time{}, err
	}
	if every, ok := schedule.(cron.ConstantDelaySchedule); ok {
		schedule = everyAligned(every.Delay)
	}
	return schedule.Next(t), nil
}
