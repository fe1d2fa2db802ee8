package dashboard

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/waitfor"
	machinery "github.com/b6192125/machinist/v1"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestMain stops the shared Redis after the tests and checks that no
// goroutine outlives them (the browser of the browser tests closes with
// their last tab).
func TestMain(m *testing.M) {
	os.Exit(redistest.RunMain(m))
}

// env is a test's machinist Server on the shared Redis (under a key
// prefix of its own) and its dashboard, served by an httptest server.
type env struct {
	t     *testing.T
	redis *redistest.Server
	srv   *machinery.Server
	in    brokers.Inspector
	h     *handler
	http  *httptest.Server
	// base is the dashboard's URL: the server's, followed by the prefix.
	base string
}

// newEnv starts a Server and its dashboard with opts.
func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	r := redistest.Shared(t)
	srv, err := machinery.NewServer(&config.Config{
		Broker:             r.URL(),
		ResultBackend:      r.URL(),
		DefaultQueue:       "default",
		NoUnixSignals:      true,
		LeaseDuration:      2 * time.Second,
		LeaseRenewInterval: 200 * time.Millisecond,
		Redis:              &config.RedisConfig{KeyPrefix: r.Prefix(t)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	hh, err := New(srv, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(hh)
	t.Cleanup(hs.Close)
	return &env{t: t, redis: r, srv: srv, in: srv.GetBroker().(brokers.Inspector), h: hh.(*handler), http: hs,
		base: hs.URL + hh.(*handler).prefix}
}

// ctx returns a context that ends with the test, within a minute.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// launch runs a worker of e's Server until the test ends.
func (e *env) launch(tag string, concurrency int) {
	w := e.srv.NewWorker(tag, concurrency)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	e.t.Cleanup(func() {
		w.Quit()
		if err := <-errs; err != nil {
			e.t.Errorf("worker %s: %v", tag, err)
		}
	})
}

// send sends a task named name to queue, with the given ETA if any.
func (e *env) send(queue, name string, eta *time.Time, args ...tasks.Arg) *tasks.Signature {
	e.t.Helper()
	sig, err := tasks.NewSignature(name, args)
	if err != nil {
		e.t.Fatal(err)
	}
	sig.RoutingKey, sig.ETA = queue, eta
	if _, err := e.srv.SendTaskWithContext(testCtx(e.t), sig); err != nil {
		e.t.Fatal(err)
	}
	return sig
}

// pause pauses queue through the broker.
func (e *env) pause(queue string) {
	e.t.Helper()
	if err := e.srv.GetBroker().(brokers.Pauser).PauseQueue(testCtx(e.t), queue); err != nil {
		e.t.Fatal(err)
	}
}

// info returns queue's counts from the broker.
func (e *env) info(queue string) *brokers.QueueInfo {
	e.t.Helper()
	qi, err := e.in.QueueInfo(testCtx(e.t), queue)
	if err != nil {
		e.t.Fatal(err)
	}
	return qi
}

// status returns where task uuid is in queue, "" when it is in none.
func (e *env) status(queue, uuid string) brokers.TaskStatus {
	e.t.Helper()
	ti, err := e.in.GetTask(testCtx(e.t), queue, uuid)
	if errors.Is(err, brokers.ErrTaskNotFound) {
		return ""
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return ti.Status
}

// eventually polls cond every 20 ms until it returns nil, failing the
// test with cond's last error after 20 s.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	waitfor.Poll(t, 20*time.Second, 20*time.Millisecond, what, cond)
}

// client is an HTTP client with a cookie jar that does not follow
// redirects.
func client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get fetches the dashboard's path p and returns the status and body.
func (e *env) get(c *http.Client, p string) (int, string) {
	e.t.Helper()
	resp, err := c.Get(e.base + p)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token loads page p with c and returns the CSRF token of its forms.
func (e *env) token(c *http.Client, p string) string {
	e.t.Helper()
	code, body := e.get(c, p)
	m := csrfInput.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		e.t.Fatalf("GET %s: %d, no CSRF token in the page:\n%s", p, code, body)
	}
	return m[1]
}

// post submits form to the dashboard's path p with c, as a browser's form
// would (Accept: text/html) unless accept says otherwise.
func (e *env) post(c *http.Client, p string, form url.Values, accept string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.base+p, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if accept == "" {
		accept = "text/html"
	}
	req.Header.Set("Accept", accept)
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}
