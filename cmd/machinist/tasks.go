package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/b6192125/machinist/internal/ops"
	"github.com/b6192125/machinist/internal/store"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

func (a *app) taskCommand() *cobra.Command {
	cmd := parent("task", "List, show and act on tasks")
	cmd.AddCommand(a.taskListCommand(), a.taskShowCommand(), a.taskWatchCommand())
	for _, act := range ops.AllActions {
		cmd.AddCommand(a.taskAllCommand(act))
	}
	for _, act := range []struct {
		action      ops.Action
		short, done string
	}{
		{ops.Cancel, "Cancel a task: a waiting one never runs, a running one is stopped", "cancelled"},
		{ops.Delete, "Delete a task that waits (pending, scheduled, retrying or limited: it never runs), or an archived one", "deleted"},
		{ops.Archive, "Move a task that waits to the archive", "archived"},
		{ops.Run, "Run a scheduled or retrying task now", "made pending, to run now"},
		{ops.Requeue, "Send an archived task back to its queue", "requeued"},
	} {
		var queue string
		c := &cobra.Command{
			Use:   string(act.action) + " TASK_UUID",
			Short: act.short,
			Args:  cobra.ExactArgs(1),
			RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
				if err := o.Do(ctx, act.action, args[0], queue); err != nil {
					return err
				}
				return a.report(map[string]string{"task": args[0], "done": act.done}, "task %s %s", args[0], act.done)
			}),
		}
		c.Flags().StringVar(&queue, "queue", "", "the task's queue (default: looked for in every queue)")
		cmd.AddCommand(c)
	}
	return cmd
}

// allActionText says what each action on all of a queue's tasks in a
// state does, and in which states.
var allActionText = map[ops.Action]struct{ short, states, done string }{
	ops.Delete:  {"Delete all of a queue's tasks in a state (they never run)", "pending, scheduled, retry, limited or archived", "deleted"},
	ops.Archive: {"Move all of a queue's tasks in a state to the archive", "pending, scheduled, retry or limited", "archived"},
	ops.Run:     {"Run all of a queue's scheduled or retrying tasks now", "scheduled or retry", "made pending, to run now"},
	ops.Requeue: {"Send all of a queue's archived tasks back to pending", "archived", "requeued"},
}

func (a *app) taskAllCommand(act ops.Action) *cobra.Command {
	text := allActionText[act]
	state := "archived"
	if act != ops.Requeue {
		state = ""
	}
	var yes bool
	cmd := &cobra.Command{
		Use:   string(act) + "-all QUEUE",
		Short: text.short,
		Long: text.short + ` (--state: ` + text.states + `), a page of
1,000 at a time, so that Redis is never held for long. Deleted and archived
tasks get a FAILURE state, as with "task ` + string(act) + `". It asks first,
unless --yes; for a very large queue raise --timeout.`,
		Args: cobra.ExactArgs(1),
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
			status := store.TaskStatus(state)
			if !ops.AllActionFor(act, status) {
				return usageError{fmt.Errorf("--state %q: %s-all takes %s", state, act, text.states)}
			}
			q, err := o.Queue(ctx, args[0])
			if err != nil {
				return err
			}
			if n := q.Count(status); !yes {
				fmt.Fprintf(a.stderr, "%s the %d %s tasks of queue %s? Type yes to go on: ", act, n, state, args[0])
				if !a.confirmed() {
					return usageError{fmt.Errorf("not confirmed: nothing was done")}
				}
			}
			n, err := o.DoAll(ctx, act, args[0], status)
			if err != nil {
				return fmt.Errorf("%w (%d tasks %s before it failed)", err, n, text.done)
			}
			return a.report(map[string]any{"queue": args[0], "state": state, "done": text.done, "tasks": n},
				"%d %s tasks of %s %s", n, state, args[0], text.done)
		}),
	}
	if act != ops.Requeue {
		cmd.Flags().StringVar(&state, "state", "", "the tasks' state: "+text.states+" (required)")
		_ = cmd.MarkFlagRequired("state")
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do it without asking")
	return cmd
}

// confirmed reads a line of the standard input and reports whether it
// says yes.
func (a *app) confirmed() bool {
	if a.stdin == nil {
		return false
	}
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	answer := strings.TrimSpace(line)
	return answer == "yes" || answer == "y"
}

func (a *app) taskListCommand() *cobra.Command {
	var state string
	var page, size int
	cmd := &cobra.Command{
		Use:   "ls QUEUE",
		Short: "List a page of a queue's tasks in one state",
		Long: `ls lists a page of the tasks of QUEUE in --state: pending (in the order they
run), active (by lease end), scheduled and retry (by when they run), archived
(newest first) or limited (parked on their limit keys, in the order they were
parked). Pages are read by position, so any page of any queue is quick.`,
		Args: cobra.ExactArgs(1),
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
			status, err := ops.ParseStatus(state)
			if err != nil {
				return usageError{err}
			}
			if page < 1 || size < 1 {
				return usagef("--page and --size start at 1")
			}
			q, err := o.Queue(ctx, args[0])
			if err != nil {
				return err
			}
			list, err := o.Tasks(ctx, q.Queue, status, (page-1)*size, size)
			if err != nil {
				return err
			}
			total := q.Count(status)
			if a.json {
				return a.printJSON(struct {
					Queue      string
					State      brokers.TaskStatus
					Page, Size int
					Total      int
					Tasks      []*brokers.TaskInfo
				}{q.Queue, status, page, size, total, nonNil(list)})
			}
			return a.printTasks(q.Queue, status, list, page, size, total)
		}),
	}
	cmd.Flags().StringVar(&state, "state", "pending", "pending, active, scheduled, retry, archived or limited")
	cmd.Flags().IntVar(&page, "page", 1, "the page to show, from 1")
	cmd.Flags().IntVar(&size, "size", 20, "tasks per page")
	return cmd
}

// stateColumns are the columns a listing of tasks in a state shows
// besides UUID, name, retried, recovered and the last error.
var stateColumns = map[brokers.TaskStatus]struct {
	header string
	value  func(*brokers.TaskInfo) string
}{
	brokers.StatusScheduled: {"RUNS AT", func(i *brokers.TaskInfo) string { return stamp(i.NextProcessAt) }},
	brokers.StatusRetry:     {"RUNS AT", func(i *brokers.TaskInfo) string { return stamp(i.NextProcessAt) }},
	brokers.StatusActive:    {"LEASE ENDS", func(i *brokers.TaskInfo) string { return stamp(i.LeaseExpiresAt) }},
	brokers.StatusArchived:  {"ARCHIVED AT", func(i *brokers.TaskInfo) string { return stamp(i.LastFailedAt) }},
	brokers.StatusLimited: {"LIMIT KEY", func(i *brokers.TaskInfo) string {
		if i.Signature.Limit == nil {
			return ""
		}
		return i.Signature.Limit.Key
	}},
}

func (a *app) printTasks(queue string, status brokers.TaskStatus, list []*brokers.TaskInfo, page, size, total int) error {
	if len(list) == 0 {
		if total > 0 {
			fmt.Fprintf(a.stdout, "no %s tasks on page %d of %s (%d in all)\n", status, page, queue, total)
		} else {
			fmt.Fprintf(a.stdout, "no %s tasks in %s\n", status, queue)
		}
		return nil
	}
	header := []string{"UUID", "NAME", "RETRIED", "RECOVERED"}
	col, extra := stateColumns[status]
	if extra {
		header = append(header, col.header)
	}
	t := newTable(a.stdout, append(header, "LAST ERROR")...)
	for _, info := range list {
		row := []string{info.Signature.UUID, info.Signature.Name, strconv.Itoa(info.Retried), strconv.Itoa(info.Recovered)}
		if extra {
			row = append(row, col.value(info))
		}
		t.row(append(row, clip(info.LastError, 60))...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	first := (page-1)*size + 1
	pages := (total + size - 1) / size
	fmt.Fprintf(a.stdout, "\n%s tasks %d–%d of %d (page %d of %d)", status, first, first+len(list)-1, total, page, max(pages, page))
	if page < pages {
		fmt.Fprintf(a.stdout, "; next: --page %d", page+1)
	}
	fmt.Fprintln(a.stdout)
	return nil
}

func (a *app) taskShowCommand() *cobra.Command {
	var queue string
	cmd := &cobra.Command{
		Use:   "show TASK_UUID",
		Short: "Show a task: its signature, where it is, its state, result or error, attempts, lease",
		Args:  cobra.ExactArgs(1),
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
			t, err := o.Task(ctx, args[0], queue)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(t)
			}
			return a.printTask(t)
		}),
	}
	cmd.Flags().StringVar(&queue, "queue", "", "the task's queue (default: looked for in every queue)")
	return cmd
}

func (a *app) printTask(t *ops.Task) error {
	f := newFields(a.stdout)
	f.add("Task", t.UUID)
	now := time.Now()
	if info := t.Info; info != nil {
		sig := info.Signature
		f.add("Name", sig.Name)
		f.add("Queue", t.Queue)
		f.add("Status", a.state(string(info.Status)))
		f.add("Args", formatArgs(sig.Args))
		if sig.ETA != nil {
			f.add("ETA", stamp(*sig.ETA))
		}
		f.add("Runs at", stamp(info.NextProcessAt))
		if !info.LeaseExpiresAt.IsZero() {
			f.add("Lease ends", stamp(info.LeaseExpiresAt)+" ("+ago(info.LeaseExpiresAt, now)+")")
		}
		if w := t.Holder; w != nil {
			f.add("Worker", fmt.Sprintf("%s pid %d (%s), %s", w.Host, w.PID, w.Tag, w.ID))
		}
		f.add("Attempts", fmt.Sprintf("%d (retried %d, recovered after a lost lease %d)", t.Attempts, info.Retried, info.Recovered))
		f.add("Progress", formatProgress(t.Progress, now))
		if sig.RetryCount > 0 || sig.RetryTimeout > 0 {
			f.add("Retries", fmt.Sprintf("%d left, next after %d s", sig.RetryCount, sig.RetryTimeout))
		}
		f.add("Last error", info.LastError)
		f.add("Failed at", stamp(info.LastFailedAt))
		if sig.GroupUUID != "" {
			f.add("Group", fmt.Sprintf("%s (%d tasks)", sig.GroupUUID, sig.GroupTaskCount))
		}
		f.add("Aggregation", sig.AggregationKey)
		if sig.Limit != nil {
			f.add("Limit", fmt.Sprintf("key %s, concurrency %d, rate %d per %s", sig.Limit.Key, sig.Limit.Concurrency, sig.Limit.Rate, sig.Limit.Per))
		}
		var headers []string
		for k, v := range sig.Headers {
			headers = append(headers, fmt.Sprintf("%s=%v", k, v))
		}
		slices.Sort(headers)
		f.add("Headers", strings.Join(headers, ", "))
	} else {
		f.add("Queue", "(none holds it: it finished and was not kept, or was deleted)")
	}
	if st := t.State; st != nil {
		if t.Info == nil {
			f.add("Name", st.TaskName)
			f.add("Progress", formatProgress(t.Progress, now))
		}
		f.add("State", a.state(st.State))
		f.add("Result", formatResults(st.Results))
		f.add("Error", st.Error)
		f.add("Workflow", st.Workflow)
		f.add("Aggregate", st.Aggregate)
		f.add("Created", stamp(st.CreatedAt))
	} else {
		f.add("State", "(none in the result backend: not written yet, or expired)")
	}
	return f.flush()
}

// formatProgress is a task's progress: "5 of 10 (50%): halfway,
// reported 3s ago", "" for none.
func formatProgress(p *tasks.Progress, now time.Time) string {
	if p == nil {
		return ""
	}
	out := fmt.Sprint(p.Done)
	if p.Total > 0 {
		out += fmt.Sprintf(" of %d (%d%%)", p.Total, p.Done*100/p.Total)
	}
	if p.Message != "" {
		out += ": " + p.Message
	}
	if !p.At.IsZero() {
		out += ", reported " + ago(p.At, now)
	}
	return out
}

// watchPoll is how often task watch reads a task's new events.
const watchPoll = 200 * time.Millisecond

func (a *app) taskWatchCommand() *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "watch TASK_UUID",
		Short: "Follow a task's events (what it emits, its progress) until it finishes",
		Long: `watch prints the task's events from the start of its stream (or after the
event --from), each with its attempt, then follows the stream until the task
reaches a final state, which it prints last. With --json, one event a line.`,
		Args: cobra.ExactArgs(1),
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
			uuid, last := args[0], from
			seen := false
			for {
				events, st, err := o.TaskEvents(ctx, uuid, last, 500)
				if err != nil {
					return err
				}
				for _, e := range events {
					last, seen = e.ID, true
					if err := a.printEvent(e); err != nil {
						return err
					}
				}
				if len(events) == 500 {
					continue
				}
				if st == nil && !seen {
					return fmt.Errorf("task %s: %w", uuid, brokers.ErrTaskNotFound)
				}
				if st != nil && st.IsCompleted() {
					return a.printEvent(tasks.Event{Kind: "state", At: time.Now().UTC(), Data: stateData(st)})
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(watchPoll):
				}
			}
		}),
	}
	cmd.Flags().StringVar(&from, "from", "", "print the events after this one (an event ID)")
	return cmd
}

// stateData is a state event's data, as AsyncResult.Watch gives it.
func stateData(st *tasks.TaskState) []byte {
	raw, _ := json.Marshal(map[string]string{"state": st.State, "error": st.Error})
	return raw
}

func (a *app) printEvent(e tasks.Event) error {
	if a.json {
		return a.printJSONLine(e)
	}
	attempt := "-"
	if e.Attempt > 0 {
		attempt = strconv.Itoa(e.Attempt)
	}
	_, err := fmt.Fprintf(a.stdout, "%s  %s  %-8s %s\n", e.At.UTC().Format("15:04:05.000"), attempt, e.Kind, e.Data)
	return err
}
