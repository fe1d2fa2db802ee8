// Package dashboard is machinist's web dashboard: an http.Handler that
// shows what a Server's broker and backend hold and lets an operator act
// on it. Mount it in your own HTTP server:
//
//	h, err := dashboard.New(srv, dashboard.Options{
//		Prefix:    "/machinist",
//		BasicAuth: dashboard.BasicAuth{User: "ops", Password: os.Getenv("DASH_PASSWORD")},
//	})
//	if err != nil {
//		return err
//	}
//	http.Handle("/machinist/", h)
//
// (`machinist dash` serves the same handler.)
//
// # Pages
//
//   - / — every queue with its counts (pending, active, scheduled, retry,
//     archived, limited, aggregating), whether it is paused, the tasks
//     processed and failed in the last minute and hour, and throughput
//     charts of the last hour: overall by 10 s period, per queue by minute.
//   - /queues/{name} — a tab per task state with its count; the tasks of a
//     state, 50 per page; a search by task UUID, and a filter by task name
//     that reads at most 1000 tasks per request and offers to search
//     further; pause and resume.
//   - /queues/{name}/aggregations — the queue's aggregation groups.
//   - /tasks/{uuid}[?queue=] — where the task is, its state and result or
//     error, its attempts, lease and worker, its signature, and the actions
//     that apply to it: cancel, delete, archive, run now, requeue.
//   - /workflows/{id} — a chain, group or chord drawn as a graph (a chain
//     left to right, a group as a framed column, a chord's members with
//     arrows into its callback), each task coloured by its state and
//     linked to its page; cancel the workflow.
//   - /workers — the worker processes alive and the tasks they run.
//
// Pages are rendered on the server from embedded templates, a stylesheet
// and a small script (no build step, nothing loaded from elsewhere). The
// script asks before each action and refreshes the live parts of a page
// every 3 s; without it every page works, unrefreshed.
//
// Every read is paged (the broker's ListTasks with an offset and a limit,
// and its counts), so pages stay fast on queues of millions of tasks.
//
// # Safety
//
// Actions are POST forms carrying a CSRF token: the HMAC, under a secret
// (Options.CSRFKey, or one of the process), of a random cookie of the browser (HttpOnly,
// SameSite=Strict), compared in constant time; a POST from another site
// (by its Origin or Sec-Fetch-Site) is refused too. A browser is sent back
// (303) to the page it came from, which says what was done or why it
// failed; a client that does not accept HTML gets 204, or 404 (unknown
// task, queue or workflow), 409 (the action does not apply to the task
// where it is, or it has finished), 403 (refused), with the error as text.
// Options.ReadOnly hides the actions and refuses them with 403. Pages send
// a Content-Security-Policy that allows only the dashboard's own script
// and stylesheet, and refuse to be framed. No page shows the broker's or
// backend's URL.
package dashboard
