package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/ops"
	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// opaqueBroker hides every interface of a broker but Broker.
type opaqueBroker struct{ brokers.Broker }

func TestNewRefusesABrokerThatCannotListItsQueues(t *testing.T) {
	t.Parallel()
	r := redistest.Shared(t)
	srv, err := machinery.NewServer(&config.Config{Broker: r.URL(), ResultBackend: r.URL(), NoUnixSignals: true,
		Redis: &config.RedisConfig{KeyPrefix: r.Prefix(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	srv.SetBroker(opaqueBroker{srv.GetBroker()})
	if _, err := New(srv, Options{}); !errors.Is(err, ops.ErrUnsupported) {
		t.Fatalf("New with a broker that is no Inspector: %v, want an error wrapping ops.ErrUnsupported", err)
	}
}

func TestPagesSendSecurityHeadersAndNoURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	sig := e.send("default", "hello", nil)
	c := client(t)
	for _, p := range []string{"/", "/queues/default", "/tasks/" + sig.UUID, "/workers", "/queues/default/aggregations", "/nowhere"} {
		resp, err := c.Get(e.base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"} {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("GET %s: %s = %q, want %q", p, k, got, want)
			}
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "style-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: Content-Security-Policy %q, want only 'self' scripts and styles", p, csp)
		}
		_, body := e.get(c, p)
		if strings.Contains(body, e.redis.Addr()) || strings.Contains(body, "redis://") {
			t.Errorf("GET %s shows the Redis URL %s:\n%s", p, e.redis.URL(), body)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, " style=") {
			t.Errorf("GET %s has an inline script or style, which the CSP forbids", p)
		}
	}
	if code, body := e.get(c, "/nowhere"); code != http.StatusNotFound || !strings.Contains(body, "There is no page") {
		t.Errorf("GET /nowhere: %d, want 404 with a message:\n%s", code, body)
	}
}

func TestBasicAuthRefusesWrongCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{BasicAuth: BasicAuth{User: "ops", Password: "s3cret"}})
	for _, tc := range []struct {
		user, pass string
		set        bool
		want       int
	}{
		{want: http.StatusUnauthorized},
		{user: "ops", pass: "wrong", set: true, want: http.StatusUnauthorized},
		{user: "other", pass: "s3cret", set: true, want: http.StatusUnauthorized},
		{user: "ops", pass: "s3cret", set: true, want: http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, e.base+"/", nil)
		if tc.set {
			req.SetBasicAuth(tc.user, tc.pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET / as %q/%q: %d, want %d", tc.user, tc.pass, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != `Basic realm="machinist", charset="UTF-8"` {
			t.Errorf("GET / as %q: WWW-Authenticate %q", tc.user, resp.Header.Get("WWW-Authenticate"))
		}
	}
}

// Every link, form and asset of a page starts with the prefix, whether
// the handler is mounted as is or behind http.StripPrefix.
func TestPrefixIsInEveryLink(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Prefix: "/machinist/"})
	sig := e.send("mail/out", "hello", nil)
	stripped := httptest.NewServer(http.StripPrefix("/machinist", e.h))
	t.Cleanup(stripped.Close)
	attr := regexp.MustCompile(`\s(?:href|action|src)="([^"]*)"`)
	for _, base := range []string{e.http.URL, stripped.URL} {
		c := client(t)
		for _, p := range []string{"/", "/queues/" + url.PathEscape("mail/out"), "/tasks/" + sig.UUID} {
			resp, err := c.Get(base + "/machinist" + p)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			_, _ = fmt.Fprint(&b, readAll(t, resp))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /machinist%s: %d:\n%s", p, resp.StatusCode, b.String())
			}
			links := attr.FindAllStringSubmatch(b.String(), -1)
			if len(links) < 5 {
				t.Fatalf("GET /machinist%s: only %d links", p, len(links))
			}
			for _, l := range links {
				if !strings.HasPrefix(l[1], "/machinist/") && !strings.HasPrefix(l[1], "#") {
					t.Errorf("GET /machinist%s: link %q lacks the prefix", p, l[1])
				}
			}
			if !strings.Contains(b.String(), `/machinist/queues/mail%2Fout`) {
				t.Errorf("GET /machinist%s: no escaped link to queue mail/out", p)
			}
		}
		resp, err := c.Get(base + "/machinist/static/dashboard.css")
		if err != nil {
			t.Fatal(err)
		}
		if css := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(css, "svg.graph") {
			t.Errorf("GET the stylesheet: %d", resp.StatusCode)
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

func TestActionsRequireTheCSRFTokenOfTheBrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.send("default", "hello", nil)
	c := client(t)
	tok := e.token(c, "/")
	other := client(t)
	otherTok := e.token(other, "/")

	refused := []struct {
		name string
		c    *http.Client
		form url.Values
		hdr  map[string]string
	}{
		{name: "no token", c: c, form: url.Values{}},
		{name: "another browser's token", c: c, form: url.Values{"csrf": {otherTok}}},
		{name: "no cookie", c: &http.Client{CheckRedirect: c.CheckRedirect}, form: url.Values{"csrf": {tok}}},
		{name: "cross-site", c: c, form: url.Values{"csrf": {tok}}, hdr: map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{name: "foreign origin", c: c, form: url.Values{"csrf": {tok}}, hdr: map[string]string{"Origin": "https://evil.example"}},
	}
	for _, tc := range refused {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/queues/default/pause", strings.NewReader(tc.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		resp, err := tc.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: POST pause answered %d, want 403", tc.name, resp.StatusCode)
		}
		if e.info("default").Paused {
			t.Fatalf("%s: the queue was paused", tc.name)
		}
	}
	if code, _ := e.get(c, "/queues/default/pause"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET of an action: %d, want 405", code)
	}

	resp := e.post(c, "/queues/default/pause", url.Values{"csrf": {tok}, "back": {"/queues/default"}}, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/queues/default" {
		t.Fatalf("POST pause with the token: %d to %q, want 303 to /queues/default", resp.StatusCode, resp.Header.Get("Location"))
	}
	if !e.info("default").Paused {
		t.Fatal("the queue is not paused after the action")
	}
	if _, body := e.get(c, "/queues/default"); !strings.Contains(body, "Queue default paused") {
		t.Errorf("the page after the action does not say the queue was paused:\n%s", body)
	}
	// Off-site "back" paths are not followed.
	for _, back := range []string{"//evil.example/", "/\t/evil.example/", "/\\evil.example/", "https://evil.example/"} {
		resp = e.post(c, "/queues/default/resume", url.Values{"csrf": {tok}, "back": {back}}, "")
		if loc := resp.Header.Get("Location"); loc != "/queues/default" {
			t.Errorf("POST resume with back %q: redirected to %q", back, loc)
		}
	}
}

func TestReadOnlyHidesAndRefusesActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{ReadOnly: true})
	eta := time.Now().Add(time.Hour)
	sig := e.send("default", "hello", &eta)
	c := client(t)
	for _, p := range []string{"/", "/queues/default", "/tasks/" + sig.UUID} {
		code, body := e.get(c, p)
		if code != http.StatusOK || strings.Contains(body, `method="post"`) || !strings.Contains(body, "read-only") {
			t.Errorf("GET %s (read-only): %d, with a POST form or without the read-only badge:\n%s", p, code, body)
		}
	}
	// With a valid token and cookie: refused for being read-only, not for
	// the token.
	const cookie = "0123456789abcdefghijklmnopqrstuv"
	for _, p := range []string{"/queues/default/pause", "/tasks/" + sig.UUID + "/run", "/workflows/x/cancel"} {
		req, _ := http.NewRequest(http.MethodPost, e.base+p, strings.NewReader(url.Values{"csrf": {e.h.csrf.sign(cookie)}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: csrfCookie, Value: cookie})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("POST %s (read-only) with a valid token: %d %q, want 403 saying read-only", p, resp.StatusCode, body)
		}
	}
	if e.status("default", sig.UUID) != brokers.StatusScheduled || e.info("default").Paused {
		t.Error("a read-only dashboard changed something")
	}
}

func TestErrorsMapToStatuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	pending := e.send("default", "hello", nil)
	c := client(t)
	tok := e.token(c, "/")
	for _, tc := range []struct {
		method, path string
		want         int
		says         string
	}{
		{"GET", "/tasks/task_nope", http.StatusNotFound, "task_nope"},
		{"GET", "/workflows/chain_nope", http.StatusNotFound, "workflow not found"},
		{"GET", "/queues/nope", http.StatusNotFound, "queue not found"},
		{"GET", "/queues/default?state=bogus", http.StatusBadRequest, "bogus"},
		{"GET", "/queues/default?offset=99999999999999999999999", http.StatusBadRequest, "offset &#34;99999999999999999999999&#34;"},
		{"GET", "/queues/default?offset=-1", http.StatusBadRequest, "a whole number from 0"},
		{"GET", "/queues/default?offset=ten", http.StatusBadRequest, "a whole number from 0"},
		{"GET", "/queues/default?offset=9223372036854775807", http.StatusOK, "No task pending from position 2."},
		{"GET", "/find?id=task_nope", http.StatusNotFound, "task_nope"},
		{"GET", "/find?id=" + pending.UUID, http.StatusSeeOther, ""},
		{"POST", "/tasks/" + pending.UUID + "/requeue", http.StatusConflict, "not archived"},
		{"POST", "/tasks/task_nope/cancel", http.StatusNotFound, "task not found"},
		{"POST", "/tasks/" + pending.UUID + "/explode", http.StatusNotFound, "no task action"},
		{"POST", "/workflows/chain_nope/cancel", http.StatusNotFound, "workflow not found"},
		{"POST", "/queues/nope/pause", http.StatusNotFound, "queue not found"},
	} {
		var code int
		var body string
		if tc.method == "GET" {
			code, body = e.get(c, tc.path)
		} else {
			req, _ := http.NewRequest(http.MethodPost, e.base+tc.path, strings.NewReader(url.Values{"csrf": {tok}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			code, body = resp.StatusCode, readAll(t, resp)
		}
		if code != tc.want || !strings.Contains(body, tc.says) {
			t.Errorf("%s %s: %d, want %d saying %q:\n%s", tc.method, tc.path, code, tc.want, tc.says, body)
		}
	}
	// A browser is sent back with the error in a flash message.
	resp := e.post(c, "/tasks/"+pending.UUID+"/requeue", url.Values{"csrf": {tok}}, "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST requeue of a pending task from a browser: %d, want 303", resp.StatusCode)
	}
	if _, body := e.get(c, resp.Header.Get("Location")); !strings.Contains(body, "flash-error") || !strings.Contains(body, "not archived") {
		t.Errorf("the page after a failed action shows no error:\n%s", body)
	}
}

func TestQueuePagesAndSearchesByName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.h.searchWindow = 40
	ctx := testCtx(t)
	var sigs []*tasks.Signature
	for i := range 120 {
		name := "alpha"
		if i%3 == 0 {
			name = "beta.report"
		}
		sig, _ := tasks.NewSignature(name, []tasks.Arg{{Type: "int64", Value: i}})
		sig.RoutingKey = "bulk"
		sigs = append(sigs, sig)
	}
	if err := e.srv.GetBroker().(brokers.LeaseBroker).PublishTasks(ctx, sigs...); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	row := regexp.MustCompile(`<tr data-task="([^"]+)">`)
	_, body := e.get(c, "/queues/bulk")
	if got := row.FindAllStringSubmatch(body, -1); len(got) != pageSize || got[0][1] != sigs[0].UUID {
		t.Fatalf("first page: %d rows (want %d), starting with the first task sent", len(got), pageSize)
	}
	if !strings.Contains(body, "Tasks 1–50 of 120 pending") || !strings.Contains(body, `id="next-page"`) || strings.Contains(body, `id="prev-page"`) {
		t.Errorf("first page: wrong position or pager:\n%s", body)
	}
	_, body = e.get(c, "/queues/bulk?state=pending&offset=100")
	if got := row.FindAllStringSubmatch(body, -1); len(got) != 20 || got[0][1] != sigs[100].UUID {
		t.Fatalf("last page: %d rows, want 20 from the 101st task", len(got))
	}
	if strings.Contains(body, `id="next-page"`) || !strings.Contains(body, `id="prev-page"`) {
		t.Errorf("last page: wrong pager")
	}

	// 40 tasks read per search: 14 of them (0, 3, … 39) are beta.
	_, body = e.get(c, "/queues/bulk?state=pending&name=BETA")
	got := row.FindAllStringSubmatch(body, -1)
	if len(got) != 14 {
		t.Fatalf("search by name: %d found, want 14 in the first 40:\n%s", len(got), body)
	}
	for i, m := range got {
		if m[1] != sigs[3*i].UUID {
			t.Fatalf("search by name: found %s at %d, want %s", m[1], i, sigs[3*i].UUID)
		}
	}
	if !strings.Contains(body, "among entries 1–40 of 120") || !strings.Contains(body, "offset=40") {
		t.Errorf("search by name: does not say how far it read, or offers no further search:\n%s", body)
	}
	_, body = e.get(c, "/queues/bulk?state=pending&name=beta&offset=80")
	if got := row.FindAllStringSubmatch(body, -1); len(got) != 13 || strings.Contains(body, `id="search-further"`) {
		t.Errorf("search from 80: %d found (want 13: 81, 84, … 117), or offers a further search at the end", len(got))
	}
	// The UUID search of the queue page opens the task.
	resp, err := c.Get(e.base + "/find?queue=bulk&id=" + sigs[7].UUID)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/tasks/"+sigs[7].UUID+"?queue=bulk" {
		t.Errorf("find by UUID: %d to %q", resp.StatusCode, loc)
	}
}

// New refuses half of the basic auth credentials and a short CSRF key;
// replicas with one key accept each other's forms.
func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	for _, o := range []Options{
		{BasicAuth: BasicAuth{User: "ops"}},
		{BasicAuth: BasicAuth{Password: "s3cret"}},
		{CSRFKey: []byte("short")},
	} {
		if _, err := New(e.srv, o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	a, err := New(e.srv, Options{CSRFKey: key})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(e.srv, Options{CSRFKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if a.(*handler).csrf.sign("cookie") != b.(*handler).csrf.sign("cookie") {
		t.Error("two dashboards with one CSRFKey sign differently")
	}
	if e.h.csrf.sign("cookie") == a.(*handler).csrf.sign("cookie") {
		t.Error("a dashboard without a CSRFKey signs as one with it")
	}
}

// Static files are served, their directory is not listed, and the
// router's own redirects keep the prefix.
func TestStaticAndRedirectsUnderAPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Prefix: "/m"})
	c := client(t)
	if code, _ := e.get(c, "/static/dashboard.css"); code != http.StatusOK {
		t.Errorf("GET a static file: %d", code)
	}
	if code, body := e.get(c, "/static/"); code != http.StatusNotFound {
		t.Errorf("GET the static directory: %d, want 404:\n%s", code, body)
	}
	for _, p := range []string{"/static", "//workers"} {
		resp, err := c.Get(e.base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && !strings.HasPrefix(loc, "/m/") {
			t.Errorf("GET /m%s: redirected to %q, without the prefix", p, loc)
		}
	}
}

// Error text shown on pages hides URLs and the credentials in them.
func TestErrorTextHidesURLs(t *testing.T) {
	t.Parallel()
	got := errorText(errors.New("dial redis://ops:s3cret@10.0.0.5:6379/0: connection refused"))
	if strings.Contains(got, "s3cret") || strings.Contains(got, "redis://") || !strings.Contains(got, "connection refused") {
		t.Errorf("errorText = %q", got)
	}
}

// Cookies are Secure with SecureCookies (behind a proxy that terminates
// TLS), and not otherwise over plain HTTP.
func TestSecureCookies(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		e := newEnv(t, Options{SecureCookies: secure})
		resp, err := http.Get(e.base + "/")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		var found bool
		for _, c := range resp.Cookies() {
			if c.Name == csrfCookie {
				found = true
				if c.Secure != secure {
					t.Errorf("SecureCookies %v: the CSRF cookie's Secure is %v", secure, c.Secure)
				}
			}
		}
		if !found {
			t.Errorf("SecureCookies %v: no CSRF cookie set by the queues page", secure)
		}
	}
}

// A workflow of any shape larger than a page is shown a page at a time,
// with links between the pages.
func TestWorkflowOfAnyShapeIsPaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	members := make([]tasks.Node, ops.GraphPage+50)
	for i := range members {
		members[i] = &tasks.Signature{Name: "nobody_runs_this", RoutingKey: "idle"}
	}
	wf, err := tasks.NewChainOf(&tasks.Signature{Name: "nobody_runs_this", RoutingKey: "idle"}, tasks.GroupOf(members...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.SendWorkflowWithContext(testCtx(t), wf); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	_, body := e.get(c, "/workflows/"+wf.ID)
	if !strings.Contains(body, "Nodes 1–200 of 251") || !strings.Contains(body, "?from=200") || strings.Count(body, `class="node `) != 200 {
		t.Fatalf("the first page does not show nodes 1–200 of 251 with a link to the next:\n%s", body)
	}
	_, body = e.get(c, "/workflows/"+wf.ID+"?from=200")
	if !strings.Contains(body, "Nodes 201–251 of 251") || !strings.Contains(body, "?from=0") || strings.Count(body, `class="node `) != 51 {
		t.Fatalf("the second page does not show nodes 201–251 with a link back:\n%s", body)
	}
}

// A running task's page shows the progress it reported, as a bar.
func TestTaskPageShowsProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	sig := e.send("long", "transcode", nil)
	ctx := testCtx(t)
	taken, err := e.srv.GetBroker().(brokers.LeaseBroker).Fetch(ctx, []string{"long"}, 1, nil)
	if err != nil || len(taken) != 1 {
		t.Fatalf("Fetch: %v, %v", taken, err)
	}
	raw, err := json.Marshal(tasks.Progress{Done: 30, Total: 120, Message: "encoding chunk 31", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.GetBroker().(store.TaskData).WriteTaskData(ctx, taken[0], map[string][]byte{store.ProgressKey: raw}); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.GetBackend().(backends.Events).AppendEvent(ctx, sig.UUID, tasks.Event{Kind: "data", Attempt: 1, Data: []byte(`"chunk 31 <done>"`)}); err != nil {
		t.Fatal(err)
	}
	_, body := e.get(client(t), "/tasks/"+sig.UUID+"?queue=long")
	if !strings.Contains(body, `<progress value="30" max="120"></progress> 30 of 120 · encoding chunk 31`) {
		t.Fatalf("the task's page shows no progress bar of 30 of 120:\n%s", body)
	}
	if !strings.Contains(body, `<td>1</td><td>data</td><td class="mono">&#34;chunk 31 &lt;done&gt;&#34;</td>`) {
		t.Fatalf("the task's page does not list its event, escaped:\n%s", body)
	}
}

// The queue page offers the actions on all the tasks of the state shown,
// each asking first; one posted acts on them all and says how many.
func TestBulkActionsOnAState(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	for range 3 {
		e.send("default", "hello", nil)
	}
	c := client(t)
	tok := e.token(c, "/")
	_, body := e.get(c, "/queues/default?state=pending")
	for _, want := range []string{`action="/queues/default/delete-all"`, `action="/queues/default/archive-all"`, `data-confirm="delete the 3 pending tasks of queue default?`} {
		if !strings.Contains(body, want) {
			t.Errorf("the pending tab has no %s", want)
		}
	}
	if strings.Contains(body, "/queues/default/run-all") {
		t.Error("the pending tab offers to run all: pending tasks run anyway")
	}
	resp := e.post(c, "/queues/default/archive-all", url.Values{"csrf": {tok}, "state": {"pending"}, "back": {"/queues/default?state=archived"}}, "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST archive-all: %d, want 303", resp.StatusCode)
	}
	if info := e.info("default"); info.Pending != 0 || info.Archived != 3 {
		t.Fatalf("after archive-all: %d pending, %d archived; want 0 and 3", info.Pending, info.Archived)
	}
	if _, body := e.get(c, "/queues/default?state=archived"); !strings.Contains(body, "3 pending tasks of queue default archived") {
		t.Errorf("the page after the action does not say what it did:\n%s", body)
	}
	resp = e.post(c, "/queues/default/run-all", url.Values{"csrf": {tok}, "state": {"pending"}}, "")
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST run-all of pending tasks: %d, want 404", resp.StatusCode)
	}
}

// Remove is refused for a queue that holds tasks, and done for an empty
// one, which then leaves the queues page.
func TestRemoveQueueAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.send("default", "hello", nil)
	c := client(t)
	tok := e.token(c, "/")
	resp := e.post(c, "/queues/default/remove", url.Values{"csrf": {tok}}, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/queues/default" {
		t.Fatalf("POST remove of a queue with a task: %d to %q, want 303 back to the queue", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, body := e.get(c, "/queues/default"); !strings.Contains(body, "it holds 1 tasks") {
		t.Errorf("the page after a refused removal does not say why:\n%s", body)
	}
	resp = e.post(c, "/queues/default/delete-all", url.Values{"csrf": {tok}, "state": {"pending"}}, "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST delete-all: %d", resp.StatusCode)
	}
	resp = e.post(c, "/queues/default/remove", url.Values{"csrf": {tok}}, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("POST remove of an empty queue: %d to %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, body := e.get(c, "/"); !strings.Contains(body, "Queue default removed.") || strings.Contains(body, `href="/queues/default"`) {
		t.Errorf("the queues page after the removal:\n%s", body)
	}
}

// The queue page charts the queue's counts by day, each day titled with
// its figures.
func TestQueueHistoryChart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	e.send("default", "hello", nil)
	mon := e.srv.GetBroker().(brokers.Monitor)
	at := time.Now()
	if err := mon.Heartbeat(context.Background(), &brokers.WorkerInfo{ID: "w1"}, time.Minute,
		brokers.StatCount{Queue: "default", At: at, Processed: 5, Failed: 1}); err != nil {
		t.Fatal(err)
	}
	_, body := e.get(client(t), "/queues/default")
	today := brokers.HistoryDay(at).Format("2006-01-02")
	for _, want := range []string{`id="queue-history"`, "<title>" + today + ": 5 processed, 1 failed</title>", "the most in a day: 5."} {
		if !strings.Contains(body, want) {
			t.Errorf("the queue page has no %s", want)
		}
	}
}

// The periodic page lists the periodic tasks registered, with their spec
// and when they run next.
func TestPeriodicPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	if err := e.srv.RegisterPeriodicTask("0 3 * * *", "nightly-report", &tasks.Signature{Name: "report", RoutingKey: "reports"}); err != nil {
		t.Fatal(err)
	}
	code, body := e.get(client(t), "/periodic")
	if code != http.StatusOK {
		t.Fatalf("GET /periodic: %d", code)
	}
	for _, want := range []string{`data-periodic="nightly-report"`, "0 3 * * *", `href="/queues/reports"`, "never"} {
		if !strings.Contains(body, want) {
			t.Errorf("the periodic page has no %s:\n%s", want, body)
		}
	}
}
