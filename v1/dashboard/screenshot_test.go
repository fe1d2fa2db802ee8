package dashboard

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

var writeScreenshots = flag.Bool("screenshots", false, "write docs/dashboard-queues.png, docs/dashboard-workflow.png and docs/dashboard-dag.png (the screenshots of docs/operating.md)")

// TestScreenshots renders the queues page (a few queues, with a chart of
// the last hour), the graph of a failed chord and that of a DAG, checks
// them, and with
// -screenshots writes them to docs/ for docs/operating.md.
func TestScreenshots(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := testCtx(t)
	registerDemoTasks(t, e)
	e.launch("billing-worker", 4)

	publish := func(queue, name string, n int, eta *time.Time) []*tasks.Signature {
		var sigs []*tasks.Signature
		for i := range n {
			s, _ := tasks.NewSignature(name, []tasks.Arg{{Name: "id", Type: "int64", Value: 1000 + i}})
			s.RoutingKey, s.ETA = queue, eta
			sigs = append(sigs, s)
		}
		if err := e.srv.GetBroker().(brokers.LeaseBroker).PublishTasks(ctx, sigs...); err != nil {
			t.Fatal(err)
		}
		return sigs
	}
	later := time.Now().Add(20 * time.Minute)
	publish("emails", "send_welcome_email", 42, nil)
	publish("emails", "send_digest", 6, &later)
	for _, s := range publish("emails", "send_receipt", 3, nil) {
		if _, err := e.in.TakeWaiting(ctx, "emails", s.UUID, brokers.TakeArchive, "smtp: 550 mailbox unavailable"); err != nil {
			t.Fatal(err)
		}
	}
	publish("reports", "build_monthly_report", 7, nil)
	e.pause("reports")
	publish("webhooks", "deliver_webhook", 12, nil)
	publish("webhooks", "deliver_webhook", 2, &later)

	// An hour of throughput, as workers would have reported it.
	mon := e.srv.GetBroker().(brokers.Monitor)
	var counts []brokers.StatCount
	for i, at := range store.StatsPeriods(time.Now()) {
		x := float64(i)
		counts = append(counts,
			brokers.StatCount{Queue: "emails", At: at, Processed: int(30 + 18*math.Sin(x/23) + 6*math.Sin(x/5)), Failed: btoi(i%41 == 7) * 4},
			brokers.StatCount{Queue: "webhooks", At: at, Processed: int(12 + 10*math.Sin(x/37+1)), Failed: btoi(i%29 == 3)},
			brokers.StatCount{Queue: "reports", At: at, Processed: btoi(i%30 == 0) * 3})
	}
	if err := mon.Heartbeat(ctx, &brokers.WorkerInfo{ID: "worker_screenshot", Host: "history", StartedAt: time.Now()}, time.Millisecond, counts...); err != nil {
		t.Fatal(err)
	}

	// A chord of eight invoices, one of which fails: the callback never
	// runs.
	group, callback := sendChord(t, e, "default", 7, 1)
	if wf := waitWorkflowDone(t, e, group); wf.State != tasks.StateFailure {
		t.Fatalf("the chord is %s, want FAILURE", wf.State)
	}

	b := e.browser()
	b.open("/", "#overall-chart")
	if got := evalJS[[]string](b, `[...document.querySelectorAll('tr[data-queue]')].map(r => r.dataset.queue)`); fmt.Sprint(got) != "[default emails reports webhooks]" {
		t.Errorf("queues shown: %v", got)
	}
	if got := b.text(`[data-k="emails|pending"]`); got != "42" {
		t.Errorf("emails shows %s pending, want 42", got)
	}
	if n := evalJS[int](b, `document.querySelectorAll('#overall-chart rect.ok').length`); n < 300 {
		t.Errorf("the throughput chart has %d bars, want one per 10 s period with tasks (over 300)", n)
	}
	screenshot(t, b, "dashboard-queues.png")

	b.open("/workflows/"+group, "#workflow-graph")
	if n := evalJS[int](b, `document.querySelectorAll('#workflow-graph g.node').length`); n != 9 {
		t.Errorf("the chord is drawn with %d tasks, want 9", n)
	}
	failed := evalJS[[]string](b, `[...document.querySelectorAll('#workflow-graph g.node[data-state="FAILURE"]')].map(g => g.dataset.uuid)`)
	if len(failed) != 2 || failed[1] != shortID(callback) {
		t.Errorf("nodes drawn FAILURE: %v, want the failed member and the callback %s", failed, shortID(callback))
	}
	screenshot(t, b, "dashboard-workflow.png")

	// A DAG: the extract feeds three steps, one of which (an outside
	// API) is allowed to fail, and the join after them feeds a group.
	dag := sendReportDAG(t, e)
	if _, err := dag.GetWithContext(ctx, 5*time.Millisecond); err != nil {
		t.Fatalf("the DAG: %v", err)
	}
	b.open("/workflows/"+dag.WorkflowUUID, "#workflow-graph")
	if n := evalJS[int](b, `document.querySelectorAll('#workflow-graph g.node').length`); n != 7 {
		t.Errorf("the DAG is drawn with %d nodes, want 7", n)
	}
	if n := evalJS[int](b, `document.querySelectorAll('#workflow-graph path.edge').length`); n != 8 {
		t.Errorf("the DAG is drawn with %d arrows, want 8", n)
	}
	if got := b.text("#workflow-counts"); !strings.Contains(got, "6 of 7 nodes succeeded, 1 failed (allowed)") {
		t.Errorf("the DAG's counts say %q", got)
	}
	screenshot(t, b, "dashboard-dag.png")
}

// sendReportDAG sends, on the default queue, a DAG whose geocode step
// fails and is allowed to.
func sendReportDAG(t *testing.T, e *env) *result.WorkflowAsyncResult {
	t.Helper()
	step := func(name string) *tasks.Signature { return &tasks.Signature{Name: name, Immutable: true} }
	err := e.srv.RegisterTasks(map[string]interface{}{
		"extract_orders":   func() error { return nil },
		"clean_customers":  func() error { return nil },
		"clean_orders":     func() error { return nil },
		"geocode_address":  func() error { return errors.New("maps API: 503 Service Unavailable") },
		"join_report":      func() error { return nil },
		"email_finance":    func() error { return nil },
		"upload_warehouse": func() error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := tasks.NewDAG("monthly-report").
		Add("extract", step("extract_orders")).
		Add("customers", step("clean_customers"), "extract").
		Add("orders", step("clean_orders"), "extract").
		Add("geocode", tasks.AllowFailure(step("geocode_address")), "extract").
		Add("join", step("join_report"), "customers", "orders", "geocode").
		Add("publish", tasks.GroupOf(step("email_finance"), step("upload_warehouse")), "join").
		Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.srv.SendWorkflowWithContext(testCtx(t), wf)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// screenshot writes the page of tab b as docs/name when -screenshots is
// given, and checks that it is a PNG either way.
func screenshot(t *testing.T, b *browserTab, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the screenshot of %s is not a PNG", name)
	}
	if !*writeScreenshots {
		return
	}
	dir := filepath.Join("..", "..", "docs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", filepath.Join(dir, name))
}
