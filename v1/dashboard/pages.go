package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/b6192125/machinist/internal/ops"
	"github.com/b6192125/machinist/internal/store"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// queuesData is the data of the queues page.
type queuesData struct {
	base
	Queues  []queueRow
	Overall chart
	Total   *ops.Queue // the sums of the queues' counts
}

// queueRow is a queue on the queues page.
type queueRow struct {
	*ops.Queue
	Chart chart
}

func (h *handler) queuesPage(w http.ResponseWriter, r *http.Request) {
	qs, err := h.ops.Queues(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := queuesData{base: h.base(w, r, "Queues", "queues")}
	d.Live = true
	var stats []*brokers.QueueStats
	for _, q := range qs {
		d.Queues = append(d.Queues, queueRow{Queue: q, Chart: newChart(periodsOf(d.Now, q.Stats), 60, 180, 28)})
		if q.Stats != nil {
			stats = append(stats, q.Stats)
		}
	}
	d.Total = ops.Sum(qs)
	d.Overall = newChart(periodsOf(d.Now, stats...), 360, 720, 120)
	h.render(w, r, "queues", d)
}

// queueData is the data of a queue's page.
type queueData struct {
	base
	Queue  *ops.Queue
	Tabs   []tab
	Status brokers.TaskStatus
	Tasks  []*brokers.TaskInfo
	// Offset is the position of the first task listed in its state, Total
	// how many tasks the state holds.
	Offset, Total    int
	PrevURL, NextURL string
	// Name is the task name searched for; Searched the positions read
	// ([From, To)), FurtherURL the search of the next window ("" at the
	// end of the list).
	Name       string
	Searched   [2]int
	FurtherURL string
	// Bulk are the actions on all the tasks of the state shown.
	Bulk []bulkAction
	// History draws the queue's counts by day, HistoryMost the most
	// processed in a day (nil and 0 when the broker keeps none).
	History     []dayBar
	HistoryMost int
}

// dayBar is a day of a queue's history as its chart draws it: its x, the
// y and heights of its processed and failed bars (in a chart 60 high),
// and what hovering it says.
type dayBar struct {
	X, Y, H, FY, FH int
	Label           string
}

// historyBars draws days, oldest first, 10 units apart.
func historyBars(days []brokers.DayCount) ([]dayBar, int) {
	most := 0
	for _, d := range days {
		most = max(most, d.Processed)
	}
	bars := make([]dayBar, len(days))
	for i, d := range days {
		b := dayBar{X: i * 10, Label: fmt.Sprintf("%s: %d processed, %d failed", d.Day.Format("2006-01-02"), d.Processed, d.Failed)}
		if most > 0 {
			b.H = (d.Processed*60 + most - 1) / most
			b.FH = (min(d.Failed, d.Processed)*60 + most - 1) / most
		}
		b.Y, b.FY = 60-b.H, 60-b.FH
		bars[i] = b
	}
	return bars, most
}

// bulkAction is an action on all of a queue's tasks in one state: its
// name (ops.Action), its button's label and what it asks first.
type bulkAction struct {
	Action, Label, Confirm string
}

// bulkActions are the actions offered on all of queue's count tasks
// with status.
func bulkActions(queue string, status brokers.TaskStatus, count int) []bulkAction {
	var out []bulkAction
	for _, a := range ops.AllActions {
		if !ops.AllActionFor(a, status) {
			continue
		}
		what := map[ops.Action]string{
			ops.Delete:  "Delete all: they never run",
			ops.Archive: "Archive all: they do not run unless requeued",
			ops.Run:     "Run all now",
			ops.Requeue: "Requeue all",
		}[a]
		out = append(out, bulkAction{Action: string(a), Label: strings.SplitN(what, ":", 2)[0],
			Confirm: fmt.Sprintf("%s the %d %s tasks of queue %s? %s.", a, count, status, queue, what)})
	}
	return out
}

// tab is a task state on a queue's page.
type tab struct {
	Status brokers.TaskStatus
	Count  int
	URL    string
}

func (h *handler) queuePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.PathValue("name")
	q, err := h.ops.Queue(ctx, name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	qv := r.URL.Query()
	status := brokers.StatusPending
	if s := qv.Get("state"); s != "" {
		if status, err = ops.ParseStatus(s); err != nil {
			h.fail(w, r, fmt.Errorf("%w: %w", errBadRequest, err))
			return
		}
	}
	offset := 0
	if s := qv.Get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			h.fail(w, r, fmt.Errorf("%w: offset %q: want the position of the first task to list, a whole number from 0", errBadRequest, s))
			return
		}
		// Past the end, the page is empty: from the end, the links count
		// back (and never overflow).
		offset = min(n, q.Count(status))
	}
	d := queueData{base: h.base(w, r, "Queue "+name, "queues"), Queue: q, Status: status, Offset: offset,
		Name: strings.TrimSpace(qv.Get("name"))}
	d.Live = d.Name == "" // a search is not run again by itself
	for _, s := range ops.Statuses {
		d.Tabs = append(d.Tabs, tab{Status: s, Count: q.Count(s), URL: h.queueURL(name, s, 0, "")})
	}
	d.Total = q.Count(status)
	if d.Total > 0 && !d.ReadOnly {
		d.Bulk = bulkActions(name, status, d.Total)
	}
	if days, err := h.ops.History(ctx, name); err == nil {
		d.History, d.HistoryMost = historyBars(days)
	} else if !errors.Is(err, ops.ErrUnsupported) {
		h.fail(w, r, err)
		return
	}
	if d.Name == "" {
		d.Tasks, err = h.ops.Tasks(ctx, name, status, offset, pageSize)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if offset > 0 {
			d.PrevURL = h.queueURL(name, status, max(offset-pageSize, 0), "")
		}
		// By the count, not by a full page: tasks that finished between
		// listing and reading them leave a page short.
		if offset+pageSize < d.Total {
			d.NextURL = h.queueURL(name, status, offset+pageSize, "")
		}
	} else {
		scanned, end, err := h.searchByName(r, name, status, offset, d.Total, d.Name, &d.Tasks)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		d.Searched = [2]int{offset, offset + scanned}
		if !end && offset+scanned < d.Total {
			d.FurtherURL = h.queueURL(name, status, offset+scanned, d.Name)
		}
	}
	h.render(w, r, "queue", d)
}

// searchByName reads the tasks of queue with status from offset, at most
// h.searchWindow positions of its list (total long when counted), and
// appends to found those whose name contains name (case-insensitively),
// stopping after a page of them. It returns how many positions it read
// (a task that finished between listing and reading leaves its position
// empty) and whether it reached the end of the list.
func (h *handler) searchByName(r *http.Request, queue string, status brokers.TaskStatus, offset, total int, name string, found *[]*brokers.TaskInfo) (scanned int, end bool, err error) {
	const chunk = 200
	want := strings.ToLower(name)
	for scanned < h.searchWindow {
		n := min(chunk, h.searchWindow-scanned)
		page, err := h.ops.Tasks(r.Context(), queue, status, offset+scanned, n)
		if err != nil {
			return scanned, false, err
		}
		for i, t := range page {
			if strings.Contains(strings.ToLower(t.Signature.Name), want) {
				*found = append(*found, t)
				if len(*found) == pageSize {
					// Positions are not known per task: those read so far
					// are at least i+1; go on from there.
					return scanned + i + 1, false, nil
				}
			}
		}
		scanned += n
		if len(page) == 0 || offset+scanned >= total {
			return min(scanned, max(total-offset, 0)), true, nil
		}
	}
	return scanned, false, nil
}

// queueURL links to the page of queue's tasks with status from offset,
// searching for name when it is set.
func (h *handler) queueURL(queue string, status brokers.TaskStatus, offset int, name string) string {
	v := url.Values{"state": {string(status)}}
	if offset > 0 {
		v.Set("offset", strconv.Itoa(offset))
	}
	if name != "" {
		v.Set("name", name)
	}
	return h.path("/queues/"+url.PathEscape(queue)) + "?" + v.Encode()
}

// taskData is the data of a task's page.
type taskData struct {
	base
	Task    *ops.Task
	Sig     *tasks.Signature // nil when no queue holds the task
	Headers []header
	Actions []action
}

type header struct{ Key, Value string }

// action is an action offered on a task's page.
type action struct {
	Name    ops.Action
	Label   string
	Confirm string
	Danger  bool
}

func (h *handler) taskPage(w http.ResponseWriter, r *http.Request) {
	uuid := r.PathValue("uuid")
	t, err := h.ops.Task(r.Context(), uuid, r.URL.Query().Get("queue"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := taskData{base: h.base(w, r, "Task "+shortID(uuid), "queues"), Task: t}
	d.Live = t.Info != nil && t.Info.Status == brokers.StatusActive
	if t.Info != nil {
		d.Sig = t.Info.Signature
		for k, v := range d.Sig.Headers {
			d.Headers = append(d.Headers, header{Key: k, Value: jsonText(v)})
		}
		slices.SortFunc(d.Headers, func(a, b header) int { return strings.Compare(a.Key, b.Key) })
		if !h.opts.ReadOnly {
			d.Actions = taskActions(t.Info.Status, uuid)
		}
	}
	h.render(w, r, "task", d)
}

// taskActions returns the actions that apply to a task with status.
func taskActions(status brokers.TaskStatus, uuid string) []action {
	id := shortID(uuid)
	run := action{Name: ops.Run, Label: "Run now", Confirm: "Run task " + id + " now?"}
	cancel := action{Name: ops.Cancel, Label: "Cancel", Confirm: "Cancel task " + id + "? It will not run (a running task is stopped).", Danger: true}
	del := action{Name: ops.Delete, Label: "Delete", Confirm: "Delete task " + id + "? It will never run.", Danger: true}
	archive := action{Name: ops.Archive, Label: "Archive", Confirm: "Archive task " + id + "? It will not run unless requeued."}
	requeue := action{Name: ops.Requeue, Label: "Requeue", Confirm: "Requeue task " + id + "? It will run again."}
	switch status {
	case brokers.StatusPending, brokers.StatusLimited:
		return []action{cancel, del, archive}
	case brokers.StatusScheduled, brokers.StatusRetry:
		return []action{run, cancel, del, archive}
	case brokers.StatusActive, brokers.StatusAggregating:
		return []action{cancel}
	case brokers.StatusArchived:
		del.Confirm = "Delete archived task " + id + "? It is gone for good."
		return []action{requeue, del}
	}
	return nil
}

// workflowData is the data of a workflow's page.
type workflowData struct {
	base
	Workflow *ops.Workflow
	Graph    *graph
	States   []stateCount
	Failed   []*ops.Node
	// Finished: no task of it can be cancelled any more.
	Finished bool
	// Pages of a workflow of any shape with more nodes than one page.
	Pages *graphPages
}

// graphPages are the links between the pages of a workflow of any shape.
type graphPages struct {
	From, To, Of int // the nodes shown, from 1
	Prev, Next   string
}

type stateCount struct {
	State string
	Count int
}

func (h *handler) workflowPage(w http.ResponseWriter, r *http.Request) {
	from, _ := strconv.Atoi(r.URL.Query().Get("from"))
	wf, err := h.ops.Workflow(r.Context(), r.PathValue("id"), max(from, 0), 0)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if wf.Graph != nil {
		h.graphPage(w, r, wf)
		return
	}
	title := "Workflow " + shortID(wf.ID)
	if wf.Kind != "" {
		title = strings.ToUpper(wf.Kind[:1]) + wf.Kind[1:] + " " + shortID(wf.ID)
	}
	d := workflowData{base: h.base(w, r, title, "")}
	d.Workflow = wf
	d.Graph = layoutWorkflow(wf, h.prefix)
	d.States = stateCounts(wf.Counts)
	d.Finished = true
	nodes := 0
	walk(wf.Root, func(n *ops.Node) {
		if n.Group {
			return
		}
		nodes++
		if n.State == tasks.StateFailure {
			d.Failed = append(d.Failed, n)
		}
		// A task whose state expired ("") is not waited for.
		if n.State != tasks.StateSuccess && n.State != tasks.StateFailure && n.State != "" {
			d.Finished = false
		}
	})
	// A big workflow is not refreshed: each refresh reads the state of
	// every task not finished.
	d.Live = !d.Finished && nodes <= liveWorkflowMax
	h.render(w, r, "workflow", d)
}

// graphPage renders the page of wf, a workflow of any shape.
func (h *handler) graphPage(w http.ResponseWriter, r *http.Request, wf *ops.Workflow) {
	g := wf.Graph
	title := "Workflow " + shortID(wf.ID)
	if g.Name != "" {
		title += " " + g.Name
	}
	d := workflowData{base: h.base(w, r, title, ""), Workflow: wf, Graph: layoutDAG(wf, h.prefix)}
	d.States = stateCounts(wf.Counts)
	for _, n := range g.Page {
		if n.State == tasks.StateFailure {
			d.Failed = append(d.Failed, &ops.Node{UUID: n.UUID, Name: n.Name, Queue: n.Queue, Error: n.Error})
		}
	}
	d.Finished = wf.State == tasks.StateSuccess || wf.State == tasks.StateFailure
	if g.Nodes > len(g.Page) {
		here := h.path("/workflows/" + url.PathEscape(wf.ID))
		p := &graphPages{From: g.Offset + 1, To: g.Offset + len(g.Page), Of: g.Nodes}
		if g.Offset > 0 {
			p.Prev = fmt.Sprintf("%s?from=%d", here, max(g.Offset-ops.GraphPage, 0))
		}
		if p.To < g.Nodes {
			p.Next = fmt.Sprintf("%s?from=%d", here, p.To)
		}
		d.Pages = p
	}
	d.Live = !d.Finished
	h.render(w, r, "workflow", d)
}

// stateCounts lists counts, by state, in the order of the states' names.
func stateCounts(counts map[string]int) []stateCount {
	var out []stateCount
	for s, n := range counts {
		out = append(out, stateCount{State: stateName(s), Count: n})
	}
	slices.SortFunc(out, func(a, b stateCount) int { return strings.Compare(a.State, b.State) })
	return out
}

// liveWorkflowMax is the most tasks a workflow's page may have to be
// refreshed by itself.
const liveWorkflowMax = 200

// walk calls fn with n and every node reachable from it, once each.
func walk(n *ops.Node, fn func(*ops.Node)) {
	seen := map[*ops.Node]bool{}
	var visit func(*ops.Node)
	visit = func(n *ops.Node) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		fn(n)
		for _, m := range n.Members {
			visit(m)
		}
		for _, m := range n.Next {
			visit(m)
		}
	}
	visit(n)
}

// workersData is the data of the workers page.
type workersData struct {
	base
	Workers []*brokers.WorkerInfo
}

func (h *handler) workersPage(w http.ResponseWriter, r *http.Request) {
	ws, err := h.ops.Workers(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := workersData{base: h.base(w, r, "Workers", "workers"), Workers: ws}
	d.Live = true
	h.render(w, r, "workers", d)
}

// periodicData is the data of the periodic tasks page.
type periodicData struct {
	base
	Entries []*ops.Periodic
}

func (h *handler) periodicPage(w http.ResponseWriter, r *http.Request) {
	es, err := h.ops.Periodic(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := periodicData{base: h.base(w, r, "Periodic tasks", "periodic"), Entries: es}
	d.Live = true
	h.render(w, r, "periodic", d)
}

// aggregationsData is the data of a queue's aggregation groups page.
type aggregationsData struct {
	base
	Queue  *ops.Queue
	Groups []*brokers.AggregationInfo
}

func (h *handler) aggregationsPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	q, err := h.ops.Queue(r.Context(), name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	gs, err := h.ops.Aggregations(r.Context(), name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := aggregationsData{base: h.base(w, r, "Aggregation groups of "+name, "queues"), Queue: q, Groups: gs}
	d.Live = true
	h.render(w, r, "aggregations", d)
}

// find opens the task or workflow named by the query's id: a task when
// a queue (the query's queue, or any) or the backend knows it, else the
// workflow.
func (h *handler) find(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	queue := r.URL.Query().Get("queue")
	if id == "" {
		h.failStatus(w, r, http.StatusBadRequest, "Give the ID of a task or workflow to find.")
		return
	}
	t, err := h.ops.Task(ctx, id, queue)
	switch {
	case err == nil:
		u := h.path("/tasks/" + url.PathEscape(t.UUID))
		if t.Queue != "" {
			u += "?queue=" + url.QueryEscape(t.Queue)
		}
		http.Redirect(w, r, u, http.StatusSeeOther)
		return
	case !errors.Is(err, brokers.ErrTaskNotFound):
		h.fail(w, r, err)
		return
	case queue != "":
		h.failStatus(w, r, http.StatusNotFound, fmt.Sprintf("Queue %s holds no task %s, and the result backend knows none.", queue, id))
		return
	}
	wf, err := h.ops.Workflow(ctx, id, 0, 0)
	switch {
	case err == nil:
		http.Redirect(w, r, h.path("/workflows/"+url.PathEscape(wf.ID)), http.StatusSeeOther)
	case errors.Is(err, backends.ErrWorkflowNotFound), errors.Is(err, ops.ErrUnsupported):
		h.failStatus(w, r, http.StatusNotFound, fmt.Sprintf("No queue holds a task %s, the result backend has no state of it, and no workflow has this ID.", id))
	default:
		h.fail(w, r, err)
	}
}

// periodsOf sums the periods of stats over the statistics window that
// ends now, oldest first (zero counts where stats have none).
func periodsOf(now time.Time, stats ...*brokers.QueueStats) []brokers.StatCount {
	starts := store.StatsPeriods(now)
	index := make(map[int64]int, len(starts))
	out := make([]brokers.StatCount, len(starts))
	for i, at := range starts {
		index[at.Unix()] = i
		out[i].At = at
	}
	for _, st := range stats {
		if st == nil {
			continue
		}
		for _, p := range st.Periods {
			if i, ok := index[p.At.Truncate(brokers.StatsPeriod).Unix()]; ok {
				out[i].Processed += p.Processed
				out[i].Failed += p.Failed
			}
		}
	}
	return out
}
