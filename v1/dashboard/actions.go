package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/b6192125/machinist/internal/ops"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// The operator's actions. Each is a POST of a dashboard form: refused
// (403) when the dashboard is read-only, when the request comes from
// another site (its Origin or Sec-Fetch-Site says so) or when its CSRF
// token does not match the browser's cookie. A browser is then sent back
// (303) to the page it came from, which shows what happened or why it
// failed; a client that does not ask for HTML gets the status instead:
// 204 when it was done, 404 for an unknown task, queue or workflow, 409
// for an action that does not apply to where the task is, with the error
// as text.

// maxForm bounds the body of an action's form (a few short fields).
const maxForm = 64 << 10

// permit checks that r may act, and answers it when not.
func (h *handler) permit(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	var err error
	switch {
	case h.opts.ReadOnly:
		err = errReadOnly
	case h.origin.Check(r) != nil:
		err = fmt.Errorf("%w (the request comes from another site)", errCSRF)
	default:
		err = h.csrf.check(r)
	}
	if err != nil {
		h.log.Warn("dashboard action refused", slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr), slog.Any("error", err))
		http.Error(w, "403 forbidden: "+err.Error(), http.StatusForbidden)
		return false
	}
	return true
}

// done answers an action: for a browser, a redirect to back with the
// outcome (ok, or err) shown once there.
func (h *handler) done(w http.ResponseWriter, r *http.Request, back, ok string, err error) {
	if err != nil {
		status := statusOf(err)
		lvl := slog.LevelWarn
		if status >= 500 {
			lvl = slog.LevelError
		}
		h.log.Log(r.Context(), lvl, "dashboard action failed", slog.String("path", r.URL.Path), slog.String("error", errorText(err)))
		if !wantsHTML(r) {
			http.Error(w, errorText(err), status)
			return
		}
		h.setFlash(w, r, flash{Error: true, Text: errorText(err)})
	} else {
		h.log.Info("dashboard action", slog.String("path", r.URL.Path), slog.String("outcome", ok), slog.String("remote", r.RemoteAddr))
		if !wantsHTML(r) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.setFlash(w, r, flash{Text: ok})
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// queueAction pauses or resumes a queue.
func (h *handler) queueAction(w http.ResponseWriter, r *http.Request) {
	if !h.permit(w, r) {
		return
	}
	name, act := r.PathValue("name"), r.PathValue("action")
	if all, ok := strings.CutSuffix(act, "-all"); ok {
		h.allAction(w, r, name, ops.Action(all))
		return
	}
	if act == "remove" {
		err := h.ops.RemoveQueue(r.Context(), name, false)
		back := "/"
		if err != nil {
			back = "/queues/" + url.PathEscape(name)
		}
		h.done(w, r, back, fmt.Sprintf("Queue %s removed.", name), err)
		return
	}
	var do func(context.Context, string) error
	switch act {
	case "pause":
		do = h.ops.Pause
	case "resume":
		do = h.ops.Resume
	default:
		http.Error(w, fmt.Sprintf("404 not found: no queue action %q (want pause, resume, remove or a state's delete-all, archive-all, run-all or requeue-all)", act), http.StatusNotFound)
		return
	}
	err := do(r.Context(), name)
	past := map[string]string{"pause": "paused: workers take none of its tasks until it is resumed", "resume": "resumed"}[act]
	h.done(w, r, h.back(r, "/queues/"+url.PathEscape(name)), fmt.Sprintf("Queue %s %s.", name, past), err)
}

// allAction acts on all of queue's tasks in the state the form names.
func (h *handler) allAction(w http.ResponseWriter, r *http.Request, queue string, act ops.Action) {
	status, err := ops.ParseStatus(r.PostFormValue("state"))
	if err != nil || !ops.AllActionFor(act, status) {
		http.Error(w, fmt.Sprintf("404 not found: no action %q on the %q tasks of a queue", act, r.PostFormValue("state")), http.StatusNotFound)
		return
	}
	n, err := h.ops.DoAll(r.Context(), act, queue, status)
	past := map[ops.Action]string{ops.Delete: "deleted", ops.Archive: "archived", ops.Run: "made pending, to run now", ops.Requeue: "requeued"}[act]
	if err != nil {
		err = fmt.Errorf("%d tasks %s before: %w", n, past, err)
	}
	h.done(w, r, h.back(r, "/queues/"+url.PathEscape(queue)+"?state="+string(status)),
		fmt.Sprintf("%d %s tasks of queue %s %s.", n, status, queue, past), err)
}

// taskAction acts on a task: cancel, delete, archive, run or requeue.
func (h *handler) taskAction(w http.ResponseWriter, r *http.Request) {
	if !h.permit(w, r) {
		return
	}
	uuid, act := r.PathValue("uuid"), ops.Action(r.PathValue("action"))
	if !slices.Contains(ops.Actions, act) {
		http.Error(w, fmt.Sprintf("404 not found: no task action %q (want one of %v)", act, ops.Actions), http.StatusNotFound)
		return
	}
	queue := r.PostFormValue("queue")
	back := "/tasks/" + url.PathEscape(uuid)
	if queue != "" {
		back += "?queue=" + url.QueryEscape(queue)
	}
	err := h.ops.Do(r.Context(), act, uuid, queue)
	if err != nil && errors.Is(err, brokers.ErrTaskNotWaiting) {
		err = fmt.Errorf("task %s: %s does not apply to where it is now: %w", uuid, act, err)
	}
	past := map[ops.Action]string{
		ops.Cancel:  "cancelled",
		ops.Delete:  "deleted: it will never run",
		ops.Archive: "archived",
		ops.Run:     "made pending: it runs next",
		ops.Requeue: "requeued: it is pending again",
	}[act]
	h.done(w, r, h.back(r, back), fmt.Sprintf("Task %s %s.", uuid, past), err)
}

// cancelWorkflow cancels a chain, group or chord.
func (h *handler) cancelWorkflow(w http.ResponseWriter, r *http.Request) {
	if !h.permit(w, r) {
		return
	}
	id := r.PathValue("id")
	err := h.ops.CancelWorkflow(r.Context(), id)
	h.done(w, r, h.back(r, "/workflows/"+url.PathEscape(id)),
		fmt.Sprintf("Workflow %s cancelled: its tasks that had not finished will not run, and are FAILURE.", id), err)
}
