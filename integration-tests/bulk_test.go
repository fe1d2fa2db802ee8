package integration_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestSendTasks: a batch of tasks is sent with one call, each with what
// a send of its own honours; a task whose UUID is given twice in the
// batch, or whose unique key is held, is refused on its own, its error at
// its place, and the others are sent and run.
func TestSendTasks(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		ctx := e.ctx()
		const n = 50
		var sigs []*tasks.Signature
		for i := range n {
			sigs = append(sigs, sig("add", int64Arg(int64(i)), int64Arg(1)))
		}
		later := time.Now().Add(50 * time.Millisecond)
		sigs[3].ETA = &later
		twin := sig("add", int64Arg(7))
		twin.UUID = "task_bulk_twin_" + p.name
		twin2 := *twin
		// The unique tasks hold their key until the test ends: a first one
		// that ran and finished before the second was sent (a Cluster
		// sends a batch task by task) would free it. Eager sends run the
		// task inside the send, so there they are plain adds.
		uniqueName := "add"
		if !p.eager {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the worker stops
			if err := e.server.RegisterTask("held", func(int64) error { <-release; return nil }); err != nil {
				t.Fatal(err)
			}
			uniqueName = "held"
		}
		unique1 := sig(uniqueName, int64Arg(5))
		unique1.UniqueFor = time.Minute
		unique2 := sig(uniqueName, int64Arg(5))
		unique2.UniqueFor = time.Minute
		sigs = append(sigs, twin, &twin2, unique1, unique2)
		results, err := e.server.SendTasks(ctx, sigs)
		var be *machinery.SendTasksError
		if !errors.As(err, &be) || len(be.Errs) != len(sigs) {
			t.Fatalf("SendTasks: %v, want a *SendTasksError with an error per task", err)
		}
		notUnique := 0
		for i, err := range be.Errs {
			switch {
			case i == n+1: // the twin's second copy
				if !errors.Is(err, brokers.ErrDuplicateTask) || !errors.Is(err, machinery.ErrNotSent) || results[i] != nil {
					t.Errorf("#%d, a UUID given twice: %v, want ErrDuplicateTask and ErrNotSent", i, err)
				}
			case (i == n+2 || i == n+3) && errors.Is(err, tasks.ErrNotUnique):
				// The batch's sends go at once: either holds the key.
				notUnique++
				if results[i] != nil {
					t.Errorf("#%d was refused, and has a result", i)
				}
			case err != nil:
				t.Errorf("#%d: %v", i, err)
			}
		}
		// In eager mode the first has run, and freed its key, before the
		// second is sent, unless they went at once.
		if notUnique > 1 || notUnique == 0 && !p.eager {
			t.Errorf("%d of the two tasks with one unique key refused, want one", notUnique)
		}
		for i, r := range results[:n] {
			out, err := r.GetWithContext(ctx, poll)
			if err != nil || !reflect.DeepEqual(values(out), []interface{}{int64(i + 1)}) {
				t.Fatalf("task #%d: %v, %v; want %d", i, values(out), err, i+1)
			}
		}
		if !errors.Is(err, brokers.ErrDuplicateTask) || notUnique == 1 && !errors.Is(err, tasks.ErrNotUnique) {
			t.Errorf("the batch error %v does not unwrap to its tasks' errors", err)
		}
	})
}

// TestSendTasksRefusesBadBatches: no signatures, too many, or a nil or
// invalid one: refused whole before anything is sent.
func TestSendTasksRefusesBadBatches(t *testing.T) {
	e := newEnv(t, pairs()[0])
	ctx := e.ctx()
	ok := sig("record", strArg("should never run"))
	for name, batch := range map[string][]*tasks.Signature{
		"empty":   nil,
		"nil":     {ok, nil},
		"no name": {ok, {Name: ""}},
		"too big": make([]*tasks.Signature, machinery.MaxSendTasks+1),
	} {
		results, err := e.server.SendTasks(ctx, batch)
		if !errors.Is(err, machinery.ErrBadBatch) || !errors.Is(err, machinery.ErrNotSent) || results != nil {
			t.Errorf("%s batch: %v, want ErrBadBatch and ErrNotSent", name, err)
		}
	}
	if n := len(e.calls.times("should never run")); n != 0 {
		t.Fatalf("a task of a refused batch ran %d times", n)
	}
}

// TestSendTasksPeelsOffRefusedTasks: a task of the batch whose UUID is
// queued already is refused on its own; the tasks sent with it in one
// script run go again without it, and are queued once each.
func TestSendTasksPeelsOffRefusedTasks(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		ctx := e.ctx()
		const queue = "bulk_nobody_consumes"
		idle := func(uuid string) *tasks.Signature {
			s := sig("add", int64Arg(1))
			s.UUID, s.RoutingKey = uuid, queue
			return s
		}
		if _, err := e.server.SendTaskWithContext(ctx, idle("task_bulk_queued")); err != nil {
			t.Fatal(err)
		}
		batch := []*tasks.Signature{idle("task_bulk_a"), idle("task_bulk_queued"), idle("task_bulk_b"), idle("task_bulk_c")}
		results, err := e.server.SendTasks(ctx, batch)
		var be *machinery.SendTasksError
		if !errors.As(err, &be) {
			t.Fatalf("SendTasks: %v, want a *SendTasksError", err)
		}
		for i, err := range be.Errs {
			if refused := i == 1; refused != (err != nil) || refused != (results[i] == nil) {
				t.Errorf("#%d: %v; want only #1 refused", i, err)
			}
		}
		if !errors.Is(be.Errs[1], brokers.ErrDuplicateTask) {
			t.Errorf("#1: %v, want ErrDuplicateTask", be.Errs[1])
		}
		info, err := e.server.GetBroker().(brokers.Inspector).QueueInfo(ctx, queue)
		if err != nil || info.Pending != 4 {
			t.Fatalf("queue %s: %+v, %v; want the 4 tasks pending, each once", queue, info, err)
		}
	})
}

// TestTypedSendAndResults: a signature made from Go values, and its
// results read as Go types.
func TestTypedSendAndResults(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		ctx := e.ctx()
		if err := e.server.RegisterTask("point", func(x, y int) (map[string]int, error) {
			return map[string]int{"X": x, "Y": y}, nil
		}); err != nil {
			t.Fatal(err)
		}
		send := func(name string, args ...any) *result.AsyncResult {
			t.Helper()
			s, err := tasks.NewSignatureOf(name, args...)
			if err != nil {
				t.Fatal(err)
			}
			r, err := e.server.SendTaskWithContext(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if sum, err := result.Get1[int64](ctx, send("add", int64(40), int64(2))); err != nil || sum != 42 {
			t.Errorf("Get1[int64]: %v, %v; want 42", sum, err)
		}
		n, s, err := result.Get2[int64, string](ctx, send("multiple_values", int64(2), "ab"))
		if err != nil || n != 4 || s != "abab" {
			t.Errorf("Get2[int64, string]: %v, %q, %v; want 4, abab", n, s, err)
		}
		type point struct{ X, Y int }
		if pt, err := result.Get1[point](ctx, send("point", 3, 4)); err != nil || pt != (point{3, 4}) {
			t.Errorf("Get1[point]: %+v, %v; want {3 4}", pt, err)
		}
		if _, err := result.Get1[string](ctx, send("add", int64(1))); err == nil || !strings.Contains(err.Error(), "int64 is not a string") {
			t.Errorf("Get1[string] of an int64: %v, want an error naming both types", err)
		}
	})
}
