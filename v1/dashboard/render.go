package dashboard

import (
	"bytes"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/b6192125/machinist/internal/ops"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// assets are the templates, the stylesheet and the script, served as they
// are: there is no build step.
//
//go:embed templates/*.html static/*
var assets embed.FS

// pageNames are the templates of the pages, each rendered inside
// templates/layout.html.
var pageNames = []string{"queues", "queue", "task", "workflow", "workers", "periodic", "aggregations", "error"}

// pages holds one template set per page.
type pages struct {
	sets map[string]*template.Template
}

func parsePages() (*pages, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("parse the layout: %w", err)
	}
	p := &pages{sets: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.Must(layout.Clone()).ParseFS(assets, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse page %s: %w", name, err)
		}
		p.sets[name] = t
	}
	return p, nil
}

// base is what every page shows around its content.
type base struct {
	Prefix   string
	Title    string
	Nav      string // the navigation entry of the page: "queues", "workers", "periodic" or ""
	CSRF     string // the token of the page's forms
	ReadOnly bool
	Flash    *flash
	Now      time.Time
	// Here is the page's path and query, without the prefix: where its
	// forms return to.
	Here string
	// Live: the page refreshes its [data-live] parts every few seconds.
	Live bool
}

// flash is the outcome of an action, shown once on the page the action
// redirected to.
type flash struct {
	Error bool   `json:"e,omitempty"`
	Text  string `json:"t"`
}

const flashCookie = "machinist_flash"

// base returns the base of a page titled title, taking the flash message
// left by the last action, if any.
func (h *handler) base(w http.ResponseWriter, r *http.Request, title, nav string) base {
	b := base{Prefix: h.prefix, Title: title, Nav: nav, ReadOnly: h.opts.ReadOnly, Now: time.Now().UTC(),
		Here: r.URL.RequestURI()}
	if !h.opts.ReadOnly {
		b.CSRF = h.csrf.token(w, r)
	}
	if ck, err := r.Cookie(flashCookie); err == nil {
		var f flash
		if raw, err := base64.RawURLEncoding.DecodeString(ck.Value); err == nil && json.Unmarshal(raw, &f) == nil && f.Text != "" {
			b.Flash = &f
		}
		http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: h.prefix + "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	return b
}

// setFlash leaves f for the next page.
func (h *handler) setFlash(w http.ResponseWriter, r *http.Request, f flash) {
	raw, _ := json.Marshal(f) // a struct of strings always encodes
	http.SetCookie(w, &http.Cookie{
		Name:     flashCookie,
		Value:    base64.RawURLEncoding.EncodeToString(raw),
		Path:     h.prefix + "/",
		MaxAge:   60,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   h.csrf.secureFor(r),
	})
}

// render writes the page name with data, status 200.
func (h *handler) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	h.renderStatus(w, r, http.StatusOK, name, data)
}

func (h *handler) renderStatus(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages.sets[name].ExecuteTemplate(&buf, "layout.html", data); err != nil {
		h.log.Error("rendering a page failed", slog.String("page", name), slog.String("path", r.URL.Path), slog.Any("error", err))
		http.Error(w, "500 internal error: the page could not be rendered (see the server's log)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// errorPage is the data of the error page.
type errorPage struct {
	base
	Status  int
	Message string
}

// fail renders the error page for err, with the status statusOf gives it.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	if status >= 500 {
		h.log.Error("a dashboard page failed", slog.String("path", r.URL.Path), slog.String("error", errorText(err)))
	}
	h.failStatus(w, r, status, errorText(err))
}

func (h *handler) failStatus(w http.ResponseWriter, r *http.Request, status int, msg string) {
	b := h.base(w, r, http.StatusText(status), "")
	h.renderStatus(w, r, status, "error", errorPage{base: b, Status: status, Message: msg})
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h.failStatus(w, r, http.StatusNotFound, fmt.Sprintf("There is no page at %s.", h.path(r.URL.Path)))
}

// postOnly answers a GET of an action: actions are POSTs of the
// dashboard's forms.
func (h *handler) postOnly(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	h.failStatus(w, r, http.StatusMethodNotAllowed, "This is an action: it is done by the form of its page (a POST), not by opening its address.")
}

// statusOf maps err to the HTTP status of the page or action that failed
// with it.
func statusOf(err error) int {
	switch {
	case errors.Is(err, brokers.ErrTaskNotFound), errors.Is(err, ops.ErrQueueNotFound),
		errors.Is(err, backends.ErrWorkflowNotFound):
		return http.StatusNotFound
	case errors.Is(err, brokers.ErrTaskNotWaiting), errors.Is(err, machinery.ErrTaskFinished), errors.Is(err, brokers.ErrQueueNotEmpty):
		return http.StatusConflict
	case errors.Is(err, ops.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, errBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, errCSRF), errors.Is(err, errReadOnly):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// Errors of requests the dashboard refuses.
var (
	errBadRequest = errors.New("bad request")
	errReadOnly   = errors.New("this dashboard is read-only: actions are disabled")
)

// credentials matches what looks like a URL with a scheme, so that error
// messages shown never carry a broker's or backend's URL (and the
// password it may hold).
var credentials = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://\S+`)

// errorText is err's message as a page shows it: without URLs.
func errorText(err error) string {
	return credentials.ReplaceAllString(err.Error(), "[URL hidden]")
}

// funcs are the functions the templates use.
var funcs = template.FuncMap{
	"seg":        url.PathEscape,
	"utc":        formatUTC,
	"ago":        relative,
	"short":      shortID,
	"jsonText":   jsonText,
	"truncate":   truncate,
	"stateName":  stateName,
	"stateClass": stateClass,
	"add":        func(a, b int) int { return a + b },
	"join":       strings.Join,
	"levels":     ops.LevelCounts,
	"at":         func(t, now time.Time) moment { return moment{T: t, Now: now} },
	"pauseForm": func(prefix, csrf, queue string, paused bool, back string) pauseForm {
		return pauseForm{Prefix: prefix, CSRF: csrf, Queue: queue, Paused: paused, Back: back}
	},
}

// moment is a time and the time the page was rendered, for the template
// "when" (the time and how long ago it was).
type moment struct{ T, Now time.Time }

// pauseForm is the data of the template "pause": the form that pauses
// or resumes Queue, then returns to Back.
type pauseForm struct {
	Prefix, CSRF, Queue, Back string
	Paused                    bool
}

// formatUTC writes t as "2026-11-27 03:41:05 UTC"; the zero time as "—".
func formatUTC(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// relative writes how long ago t was, or how long until it comes, from
// now: "3 s ago", "in 2 min".
func relative(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, ""
	}
	var s string
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		s = fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		s = fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	if suffix == "" {
		return "in " + s
	}
	return s + suffix
}

// shortID returns the first 8 characters of a UUID, after its "task_" or
// similar prefix.
func shortID(id string) string {
	if i := strings.LastIndexByte(id, '_'); i >= 0 && i < len(id)-1 {
		id = id[i+1:]
	}
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// jsonText writes v as JSON (strings quoted, numbers as they are), or
// with %v when it cannot be encoded.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// truncate cuts s to n runes, marking the cut with "…".
func truncate(n int, s string) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}

// stateName is a task state as pages show it: "unknown" for "" (the
// backend has none any more).
func stateName(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// wantsHTML reports whether r comes from a browser that follows a
// redirect to a page (its Accept names HTML), rather than from a script
// that wants the status.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// back returns the dashboard path a form asks to return to (its "back"
// field), or fallback when it names none or something else than a path
// of the dashboard.
func (h *handler) back(r *http.Request, fallback string) string {
	b := r.PostFormValue("back")
	u, err := url.Parse(b)
	if b == "" || err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(b, "/") || strings.HasPrefix(b, "//") ||
		strings.ContainsFunc(b, func(c rune) bool { return c < 0x20 || c == 0x7f || c == '\\' }) {
		return h.path(fallback)
	}
	return h.path(b)
}
