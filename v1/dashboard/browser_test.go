package dashboard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/b6192125/machinist/internal/browsertest"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// browserTab is a browser tab on a test's dashboard.
type browserTab struct {
	t       *testing.T
	ctx     context.Context
	base    string
	dialogs func() []string
}

func (e *env) browser() *browserTab {
	ctx := browsertest.New(e.t)
	return &browserTab{t: e.t, ctx: ctx, base: e.base, dialogs: browsertest.AcceptDialogs(ctx)}
}

// open loads the dashboard's path p and waits for sel to be visible.
func (b *browserTab) open(p, sel string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.base+p), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("open %s and wait for %s: %v", p, sel, err)
	}
}

// text returns the text of the first element sel matches.
func (b *browserTab) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func evalJS[T any](b *browserTab, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitJS waits until js is true in the page.
func (b *browserTab) waitJS(what, js string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v", what, js, err)
	}
}

// act clicks the action button sel, accepts its confirmation, and waits
// for the page it leads to, returning its flash message. The page it
// leaves is marked first, so that a flash it shows (of an earlier action)
// is not taken for the new page's.
func (b *browserTab) act(sel string) string {
	b.t.Helper()
	asked := len(b.dialogs())
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.documentElement.dataset.left = "1"; true`)); err != nil {
		b.t.Fatalf("mark the page before clicking %s: %v", sel, err)
	}
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("click %s: %v", sel, err)
	}
	const arrived = `!document.documentElement.dataset.left && document.readyState === "complete" && !!document.querySelector(".flash")`
	for deadline := time.Now().Add(20 * time.Second); ; {
		// Evaluating fails while the page is being replaced: try again.
		if ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](arrived)); err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("click %s: no new page with a flash message within 20s", sel)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not waiting in its place
	}
	if len(b.dialogs()) == asked {
		b.t.Errorf("click %s: no confirmation was asked", sel)
	}
	return b.text(".flash")
}

// A queue's counts on the queues page are the broker's, and they follow
// the broker without a reload.
func TestBrowserQueuesPageShowsTheCountsLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	eta := time.Now().Add(time.Hour)
	for range 3 {
		e.send("emails", "send_email", nil)
	}
	e.send("emails", "send_email", &eta)
	archived := e.send("emails", "send_email", nil)
	if _, err := e.in.TakeWaiting(testCtx(t), "emails", archived.UUID, brokers.TakeArchive, "test"); err != nil {
		t.Fatal(err)
	}
	e.send("reports", "build_report", nil)
	e.pause("reports")

	b := e.browser()
	b.open("/", "table.queues")
	for _, q := range []string{"emails", "reports"} {
		qi := e.info(q)
		for field, want := range map[string]int{"pending": qi.Pending, "active": qi.Active, "scheduled": qi.Scheduled,
			"retry": qi.Retry, "archived": qi.Archived, "limited": qi.Limited, "aggregating": qi.Aggregating} {
			if got := b.text(fmt.Sprintf(`tr[data-queue=%q] [data-count=%q]`, q, field)); got != strconv.Itoa(want) {
				t.Errorf("queue %s: %s shows %s, the broker says %d", q, field, got, want)
			}
		}
	}
	if qi := e.info("emails"); qi.Pending != 3 || qi.Scheduled != 1 || qi.Archived != 1 {
		t.Fatalf("the test's queue holds %+v, want 3 pending, 1 scheduled, 1 archived", qi)
	}
	paused := evalJS[[]string](b, `[...document.querySelectorAll('tr[data-queue] .badge.paused')].map(e => e.closest('tr').dataset.queue)`)
	if len(paused) != 1 || paused[0] != "reports" {
		t.Errorf("queues shown paused: %v, want [reports]", paused)
	}

	// Two more tasks: the page shows them by itself.
	e.send("emails", "send_email", nil)
	e.send("emails", "send_email", nil)
	b.waitJS("the pending count to follow", `document.querySelector('[data-k="emails|pending"]').textContent.trim() === "5"`)
	if n := evalJS[int](b, `Number(document.body.dataset.refreshes || 0)`); n < 1 {
		t.Errorf("the page was not refreshed by its script (refreshes %d)", n)
	}
}

func TestBrowserPausesAndResumesAQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.send("default", "hello", nil)
	b := e.browser()
	b.open("/queues/default", ".tabs")
	if got := b.text(`[data-tab="pending"] .count`); got != "1" {
		t.Errorf("pending browserTab count %s, want 1", got)
	}
	if msg := b.act(`button[data-action="pause"]`); !strings.Contains(msg, "Queue default paused") {
		t.Errorf("after pause the page says %q", msg)
	}
	if !e.info("default").Paused {
		t.Fatal("the queue is not paused after the pause button")
	}
	if d := b.dialogs(); !strings.Contains(d[len(d)-1], "Pause queue default?") {
		t.Errorf("the confirmation asked %q", d[len(d)-1])
	}
	if msg := b.act(`button[data-action="resume"]`); !strings.Contains(msg, "Queue default resumed") {
		t.Errorf("after resume the page says %q", msg)
	}
	if e.info("default").Paused {
		t.Fatal("the queue is still paused after the resume button")
	}
}

// Each action of a task's page, clicked and confirmed, does what it says
// in the broker.
func TestBrowserActsOnTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	b := e.browser()
	const q = "work" // no worker consumes it
	eta := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		action   string
		setup    func() *tasks.Signature
		shown    brokers.TaskStatus
		want     brokers.TaskStatus // "": in no queue
		failure  string             // the state's error after it, when it fails the task
		flashHas string
	}{
		{action: "run", setup: func() *tasks.Signature { return e.send(q, "later", &eta) },
			shown: brokers.StatusScheduled, want: brokers.StatusPending, flashHas: "made pending"},
		{action: "archive", setup: func() *tasks.Signature { return e.send(q, "now", nil) },
			shown: brokers.StatusPending, want: brokers.StatusArchived, failure: "archived", flashHas: "archived"},
		{action: "requeue", setup: func() *tasks.Signature {
			s := e.send(q, "again", nil)
			if _, err := e.in.TakeWaiting(testCtx(t), q, s.UUID, brokers.TakeArchive, "test"); err != nil {
				t.Fatal(err)
			}
			return s
		}, shown: brokers.StatusArchived, want: brokers.StatusPending, flashHas: "requeued"},
		{action: "delete", setup: func() *tasks.Signature { return e.send(q, "never", nil) },
			shown: brokers.StatusPending, want: "", failure: "deleted", flashHas: "deleted"},
		{action: "cancel", setup: func() *tasks.Signature { return e.send(q, "stop", nil) },
			shown: brokers.StatusPending, want: "", failure: "cancelled", flashHas: "cancelled"},
	} {
		sig := tc.setup()
		b.open("/tasks/"+sig.UUID+"?queue="+q, "#task-status")
		if got := b.text("#task-status"); got != string(tc.shown) {
			t.Errorf("%s: the page shows the task %s, want %s", tc.action, got, tc.shown)
		}
		msg := b.act(fmt.Sprintf(`button[data-action=%q]`, tc.action))
		if !strings.Contains(msg, tc.flashHas) || !strings.Contains(msg, sig.UUID) {
			t.Errorf("%s: the page says %q", tc.action, msg)
		}
		if got := e.status(q, sig.UUID); got != tc.want {
			t.Errorf("%s: the task is %q in the broker, want %q", tc.action, got, tc.want)
		}
		if tc.failure != "" {
			st, err := e.srv.GetBackend().(backends.ContextBackend).GetStateContext(testCtx(t), sig.UUID)
			if err != nil || st.State != tasks.StateFailure || !strings.Contains(st.Error, tc.failure) {
				t.Errorf("%s: the task's state is %+v (%v), want FAILURE saying %q", tc.action, st, err, tc.failure)
			}
		}
	}
}

// A chord whose member failed is drawn with every member, the failed one
// red, and its callback not run; the worker that ran it is listed.
func TestBrowserShowsAFailedChordAndTheWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	registerDemoTasks(t, e)
	e.launch("dash-worker", 2)
	group, callback := sendChord(t, e, "default", 4, 1)

	wf := waitWorkflowDone(t, e, group)
	if wf.State != tasks.StateFailure {
		t.Fatalf("the chord is %s, want FAILURE", wf.State)
	}
	b := e.browser()
	b.open("/workflows/"+group, "#workflow-graph")
	if got := evalJS[int](b, `document.querySelectorAll('#workflow-graph g.node').length`); got != 6 {
		t.Errorf("the graph draws %d tasks, want 6 (5 members and the callback)", got)
	}
	if got := evalJS[int](b, `document.querySelectorAll('#workflow-graph path.edge').length`); got != 5 {
		t.Errorf("the graph draws %d arrows, want 5 (each member into the callback)", got)
	}
	failed := evalJS[[]string](b, `[...document.querySelectorAll('#workflow-graph g.node[data-state="FAILURE"]')].map(g => getComputedStyle(g.querySelector('rect')).fill + " " + g.dataset.uuid + " " + g.querySelector('.error').textContent)`)
	want := []string{
		"rgb(253, 232, 232) " + shortID(wf.Root.Members[4].UUID) + " disk full on shard 3",
		"rgb(253, 232, 232) " + shortID(callback) + " chord member " + wf.Root.Members[4].UUID[:13], // cut at 27 characters
	}
	if len(failed) != 2 || failed[0] != want[0] || !strings.HasPrefix(failed[1], want[1]) {
		t.Errorf("failed nodes: %q, want the failed member and the callback, red (rgb(253, 232, 232)), with their errors: %q", failed, want)
	}
	if got := evalJS[int](b, `document.querySelectorAll('#workflow-graph g.node[data-state="SUCCESS"]').length`); got != 4 {
		t.Errorf("%d nodes drawn SUCCESS, want 4", got)
	}
	// The callback failed without running: no queue ever held it.
	if got := e.status("default", callback); got != "" {
		t.Errorf("the callback is %s in its queue: it was sent", got)
	}
	if got := b.text("#workflow-state"); got != "FAILURE" {
		t.Errorf("the workflow is shown %s", got)
	}
	// The failed node leads to its task's page, which shows the error.
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`#workflow-graph g.node[data-state="FAILURE"]`)), chromedp.WaitVisible(chromedp.CSS("#task-error"))); err != nil {
		t.Fatal(err)
	}
	if got := b.text("#task-error"); !strings.Contains(got, "disk full on shard 3") {
		t.Errorf("the failed task's page shows the error %q", got)
	}
	if got := b.text("#workflow-link"); got != group {
		t.Errorf("the failed task links to workflow %q, want %s", got, group)
	}

	b.open("/workers", "#workers")
	ws, err := e.h.ops.Workers(testCtx(t))
	if err != nil || len(ws) != 1 {
		t.Fatalf("the broker lists workers %v (%v), want 1", ws, err)
	}
	row := fmt.Sprintf(`tr[data-worker=%q]`, ws[0].ID)
	if got := b.text(row + " td.mono"); got != "dash-worker" {
		t.Errorf("worker tag shown %q", got)
	}
	if got := b.text(row + " td:nth-child(5)"); got != "2" {
		t.Errorf("worker concurrency shown %q, want 2", got)
	}
	if got := b.text(row + " td:nth-child(2)"); got != strconv.Itoa(ws[0].PID) {
		t.Errorf("worker pid shown %q, want %d", got, ws[0].PID)
	}

	// The queues page counts the 5 tasks processed, one failed (the
	// workers report them with their heartbeat).
	b.open("/", "table.queues")
	b.waitJS("the statistics of the chord", `document.querySelector('[data-k="default|processed"]').textContent.trim() === "5 / 5" &&
		document.querySelector('[data-k="default|failed"]').textContent.trim() === "1 / 1"`)
	if n := evalJS[int](b, `document.querySelectorAll('#overall-chart rect.bad').length`); n < 1 {
		t.Error("the throughput chart shows no failure")
	}
}

func TestBrowserCancelsAWorkflowFoundByID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.pause("held")
	var steps []*tasks.Signature
	for i := range 3 {
		s, _ := tasks.NewSignature("add", []tasks.Arg{{Type: "int64", Value: i}, {Type: "int64", Value: 1}})
		s.RoutingKey = "held"
		steps = append(steps, s)
	}
	chain, err := tasks.NewChain(steps...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.SendChainWithContext(testCtx(t), chain); err != nil {
		t.Fatal(err)
	}
	wf, err := e.h.ops.Workflow(testCtx(t), steps[0].UUID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.open("/", "header .find input")
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.CSS("header .find input"), wf.ID+"\n"), chromedp.WaitVisible(chromedp.CSS("#workflow-graph"))); err != nil {
		t.Fatalf("open the workflow by its ID from the navigation bar: %v", err)
	}
	if got := evalJS[int](b, `document.querySelectorAll('#workflow-graph g.node').length`); got != 3 {
		t.Errorf("the chain is drawn with %d tasks, want 3", got)
	}
	xs := evalJS[[]float64](b, `[...document.querySelectorAll('#workflow-graph g.node rect')].map(r => r.x.baseVal.value)`)
	if len(xs) != 3 || !(xs[0] < xs[1] && xs[1] < xs[2]) {
		t.Errorf("the chain's steps are at x %v, want left to right", xs)
	}
	if msg := b.act(`button[data-action="cancel-workflow"]`); !strings.Contains(msg, "cancelled") {
		t.Errorf("after cancelling the page says %q", msg)
	}
	if got := e.status("held", steps[0].UUID); got != "" {
		t.Errorf("the chain's first task is still %s", got)
	}
	for _, s := range steps {
		st, err := e.srv.GetBackend().(backends.ContextBackend).GetStateContext(testCtx(t), s.UUID)
		if err != nil && !errors.Is(err, backends.ErrStateNotFound) {
			t.Fatal(err)
		}
		if err == nil && st.State != tasks.StateFailure {
			t.Errorf("task %s of the cancelled chain is %s", s.UUID, st.State)
		}
	}
	if got := b.text("#workflow-state"); got != "FAILURE" {
		t.Errorf("the cancelled chain is shown %s", got)
	}
	if n := evalJS[int](b, `document.querySelectorAll('button[data-action="cancel-workflow"]').length`); n != 0 {
		t.Errorf("a finished workflow still offers to cancel it")
	}
}

// The aggregation groups page lists what waits in the broker's groups.
func TestBrowserShowsAggregationGroups(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	err := e.srv.RegisterAggregator("notify", machinery.AggregationPolicy{MaxSize: 10, MaxDelay: time.Hour},
		func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			return &tasks.Signature{Name: "digest"}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	e.launch("aggregator", 1) // announces the aggregator, so members are accepted
	eventually(t, "members to be accepted", func() error {
		_, err := e.srv.SendTaskWithContext(testCtx(t), &tasks.Signature{Name: "notify", RoutingKey: "default", AggregationKey: "alice"})
		return err
	})
	for _, key := range []string{"alice", "bob", "bob"} {
		if _, err := e.srv.SendTaskWithContext(testCtx(t), &tasks.Signature{Name: "notify", RoutingKey: "default", AggregationKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	groups, err := e.srv.GetBroker().(brokers.Aggregator).Aggregations(testCtx(t), "default")
	if err != nil || len(groups) != 2 {
		t.Fatalf("the broker's groups: %v, %v; want alice's and bob's", groups, err)
	}
	b := e.browser()
	b.open("/queues/default/aggregations", "#aggregations")
	for _, g := range groups {
		if got := b.text(fmt.Sprintf(`[data-k=%q]`, g.Name+"|"+g.Key+"|size")); got != strconv.Itoa(g.Size) || g.Size != 2 {
			t.Errorf("group %s/%s: the page shows size %s, the broker says %d (want 2)", g.Name, g.Key, got, g.Size)
		}
	}
	if got := b.text(`[data-k="count"]`); !strings.HasPrefix(got, "2 groups waiting, 4 members") {
		t.Errorf("the page says %q, want 2 groups and 4 members", got)
	}
}
