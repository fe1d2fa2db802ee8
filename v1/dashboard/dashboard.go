package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"github.com/b6192125/machinist/internal/ops"
	"github.com/b6192125/machinist/internal/pair"
	machinery "github.com/b6192125/machinist/v1"
)

// Options configures the dashboard.
type Options struct {
	// ReadOnly hides every action (pause, cancel, delete, archive, run
	// now, requeue, cancel workflow) and refuses their POSTs with 403.
	ReadOnly bool
	// BasicAuth, when set, requires these credentials on every request
	// (realm "machinist"); they are compared in constant time. A user
	// without a password, or a password without a user, is refused by
	// New (an unset variable would otherwise leave the dashboard open).
	BasicAuth BasicAuth
	// Prefix is the path the handler is mounted under ("/machinist"), ""
	// for the root. Every link and form starts with it. The handler
	// accepts requests whose path starts with Prefix (mounted as is) and
	// requests whose Prefix was stripped (http.StripPrefix).
	Prefix string
	// Logger receives the operators' actions and the errors of pages;
	// nil: the Server's logger.
	Logger *slog.Logger
	// CSRFKey signs the tokens of the dashboard's forms (at least 32
	// bytes). Set the same key on every replica that serves the dashboard
	// behind one address, so that a form loaded from one can be posted to
	// another; nil: a random key of this process (forms loaded before a
	// restart must be reloaded).
	CSRFKey []byte
	// SecureCookies marks the dashboard's cookies Secure on every
	// response (behind a proxy that terminates TLS); without it they are
	// Secure when the request came over TLS to this process.
	SecureCookies bool
}

// BasicAuth holds the credentials of HTTP basic authentication.
type BasicAuth struct {
	User, Password string
}

// pageSize is how many tasks a page of a queue's task list shows, and
// searchWindow how many tasks a search by name reads at most per request.
const (
	pageSize     = 50
	searchWindow = 1000
)

// handler serves the dashboard.
type handler struct {
	ops      *ops.Ops
	opts     Options
	prefix   string // Options.Prefix, cleaned: "" or "/x" without a trailing slash
	log      *slog.Logger
	mux      *http.ServeMux
	csrf     *csrf
	origin   *http.CrossOriginProtection
	pages    *pages
	static   http.Handler
	authHash [2][sha256.Size]byte // the user's and password's digests

	// searchWindow is how many tasks a search by name reads per request
	// (searchWindow; tests make it smaller).
	searchWindow int
}

// New returns the dashboard of srv's broker and backend as an
// http.Handler: queues, their tasks, tasks, workflows, aggregation groups
// and workers, with the operator's actions. A broker that cannot list
// what it holds is refused with an error wrapping ops.ErrUnsupported.
func New(srv *machinery.Server, opts Options) (http.Handler, error) {
	if (opts.BasicAuth.User == "") != (opts.BasicAuth.Password == "") {
		return nil, errors.New("dashboard: BasicAuth needs both a user and a password (one is empty)")
	}
	if opts.CSRFKey != nil && len(opts.CSRFKey) < 32 {
		return nil, fmt.Errorf("dashboard: CSRFKey has %d bytes, want at least 32", len(opts.CSRFKey))
	}
	o, err := ops.New(pair.New(srv.GetBroker(), srv.GetBackend(), srv.Logger()), srv)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	prefix := strings.TrimRight(opts.Prefix, "/")
	if prefix != "" && !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	log := opts.Logger
	if log == nil {
		log = srv.Logger()
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	c, err := newCSRF(prefix, opts.CSRFKey, opts.SecureCookies)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	staticFS, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	h := &handler{
		ops:          o,
		opts:         opts,
		prefix:       prefix,
		log:          log.With(slog.String("component", "dashboard")),
		csrf:         c,
		origin:       http.NewCrossOriginProtection(),
		pages:        p,
		static:       http.StripPrefix("/static/", http.FileServerFS(filesOnly{staticFS})),
		searchWindow: searchWindow,
	}
	h.authHash = [2][sha256.Size]byte{sha256.Sum256([]byte(opts.BasicAuth.User)), sha256.Sum256([]byte(opts.BasicAuth.Password))}
	h.routes()
	return h, nil
}

func (h *handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.queuesPage)
	m.HandleFunc("GET /queues/{name}", h.queuePage)
	m.HandleFunc("GET /queues/{name}/aggregations", h.aggregationsPage)
	m.HandleFunc("GET /tasks/{uuid}", h.taskPage)
	m.HandleFunc("GET /workflows/{id}", h.workflowPage)
	m.HandleFunc("GET /workers", h.workersPage)
	m.HandleFunc("GET /periodic", h.periodicPage)
	m.HandleFunc("GET /find", h.find)
	m.Handle("GET /static/", h.static)
	m.HandleFunc("POST /queues/{name}/{action}", h.queueAction)
	m.HandleFunc("POST /tasks/{uuid}/{action}", h.taskAction)
	m.HandleFunc("POST /workflows/{id}/cancel", h.cancelWorkflow)
	for _, p := range []string{"/queues/{name}/{action}", "/tasks/{uuid}/{action}", "/workflows/{id}/cancel"} {
		m.HandleFunc("GET "+p, h.postOnly)
	}
	m.HandleFunc("/", h.notFound)
	h.mux = m
}

// ServeHTTP checks the credentials, sets the security headers, strips
// the prefix and routes the request.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	if h.opts.BasicAuth.User != "" && !h.authorized(r) {
		hd.Set("WWW-Authenticate", `Basic realm="machinist", charset="UTF-8"`)
		http.Error(w, "401 unauthorized: this dashboard requires a user name and password", http.StatusUnauthorized)
		return
	}
	if h.prefix != "" {
		if r.URL.Path == h.prefix {
			http.Redirect(w, r, h.prefix+"/", http.StatusMovedPermanently)
			return
		}
		if strings.HasPrefix(r.URL.Path, h.prefix+"/") {
			r2 := new(http.Request)
			*r2 = *r
			u := *r.URL
			u.Path = strings.TrimPrefix(r.URL.Path, h.prefix)
			u.RawPath = strings.TrimPrefix(r.URL.RawPath, h.prefix)
			r2.URL = &u
			r = r2
		}
	}
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		hd.Set("Cache-Control", "no-store")
	}
	h.mux.ServeHTTP(prefixed{w, h.prefix}, r)
}

// prefixed is a ResponseWriter that puts the prefix before the path of a
// redirect the router makes itself ("/static" → "/static/", a cleaned
// path), which it writes without it.
type prefixed struct {
	http.ResponseWriter
	prefix string
}

func (p prefixed) WriteHeader(status int) {
	if loc := p.Header().Get("Location"); status >= 300 && status < 400 && p.prefix != "" &&
		strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, p.prefix+"/") {
		p.Header().Set("Location", p.prefix+loc)
	}
	p.ResponseWriter.WriteHeader(status)
}

// filesOnly serves the files of an fs.FS, not its directories (no
// listing).
type filesOnly struct{ fs.FS }

func (f filesOnly) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := file.Stat(); err != nil || st.IsDir() {
		file.Close()
		return nil, fs.ErrNotExist
	}
	return file, nil
}

// authorized reports whether r carries the configured credentials,
// comparing digests in constant time (so that neither the content nor
// the length of the credentials leaks).
func (h *handler) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	return subtle.ConstantTimeCompare(u[:], h.authHash[0][:])&subtle.ConstantTimeCompare(p[:], h.authHash[1][:]) == 1
}

// path returns the link to the dashboard's path p ("/queues/x").
func (h *handler) path(p string) string { return h.prefix + p }
