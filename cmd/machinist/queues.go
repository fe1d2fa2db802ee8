package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/b6192125/machinist/internal/ops"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

func (a *app) statsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Every queue: its tasks by state, and those processed and failed in the last minute and hour",
		Long: `stats lists every queue with its tasks by state, and how many tasks its workers
processed (and how many of those failed) in the last minute and the last hour,
as the workers report them with their heartbeats (every few seconds).`,
		Args: cobra.NoArgs,
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, _ []string) error {
			qs, done, err := a.queues(ctx, o)
			if done || err != nil {
				return err
			}
			t := newTable(a.stdout, "QUEUE", "PAUSED", "PENDING", "ACTIVE", "SCHEDULED", "RETRY", "ARCHIVED", "LIMITED",
				"AGGREGATING", "PROCESSED 1M", "FAILED 1M", "PROCESSED 1H", "FAILED 1H")
			for _, q := range qs {
				t.row(a.queueRow(q)...)
			}
			if len(qs) > 1 {
				total := ops.Sum(qs)
				total.Queue = "(all)"
				row := a.queueRow(total)
				row[1] = ""
				t.row(row...)
			}
			return t.flush()
		}),
	}
}

// queues reads every queue for a listing, and reports done when it has
// printed them already: as JSON, or that there are none.
func (a *app) queues(ctx context.Context, o *ops.Ops) ([]*ops.Queue, bool, error) {
	qs, err := o.Queues(ctx)
	switch {
	case err != nil:
		return nil, true, err
	case a.json:
		return qs, true, a.printJSON(nonNil(qs))
	case len(qs) == 0:
		_, err := fmt.Fprintln(a.stdout, "no queues: no task was sent yet")
		return qs, true, err
	}
	return qs, false, nil
}

func (a *app) queueRow(q *ops.Queue) []string {
	n := strconv.Itoa
	failed := func(v int) string {
		if v > 0 {
			return a.paint(red, n(v))
		}
		return n(v)
	}
	return []string{q.Queue, yesNo(q.Paused), n(q.Pending), n(q.Active), n(q.Scheduled), n(q.Retry), failed(q.Archived),
		n(q.Limited), n(q.Aggregating), n(q.Processed.Minute), failed(q.Failed.Minute), n(q.Processed.Hour), failed(q.Failed.Hour)}
}

func (a *app) queueCommand() *cobra.Command {
	cmd := parent("queue", "List, inspect, pause, resume and remove queues")
	cmd.AddCommand(a.queueRemoveCommand(), a.queueHistoryCommand())
	cmd.AddCommand(&cobra.Command{
		Use:   "ls",
		Short: "List the queues, with how many tasks each holds",
		Args:  cobra.NoArgs,
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, _ []string) error {
			qs, done, err := a.queues(ctx, o)
			if done || err != nil {
				return err
			}
			t := newTable(a.stdout, "QUEUE", "PAUSED", "TASKS", "PENDING", "ACTIVE", "ARCHIVED")
			for _, q := range qs {
				held := q.Pending + q.Active + q.Scheduled + q.Retry + q.Archived + q.Limited + q.Aggregating
				t.row(q.Queue, yesNo(q.Paused), strconv.Itoa(held), strconv.Itoa(q.Pending), strconv.Itoa(q.Active), strconv.Itoa(q.Archived))
			}
			return t.flush()
		}),
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "inspect QUEUE",
		Short: "A queue's tasks by state, its throughput, and its aggregation groups",
		Args:  cobra.ExactArgs(1),
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
			q, err := o.Queue(ctx, args[0])
			if err != nil {
				return err
			}
			groups, err := o.Aggregations(ctx, q.Queue)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					*ops.Queue
					Aggregations []*brokers.AggregationInfo
				}{q, nonNil(groups)})
			}
			return a.printQueue(q, groups)
		}),
	})
	for _, pause := range []bool{true, false} {
		use, short := "pause QUEUE", "Stop the workers from taking the queue's tasks (they are still sent to it)"
		if !pause {
			use, short = "resume QUEUE", "Let the workers take the queue's tasks again"
		}
		cmd.AddCommand(&cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
				do, done := o.Pause, "paused"
				if !pause {
					do, done = o.Resume, "resumed"
				}
				if err := do(ctx, args[0]); err != nil {
					return err
				}
				return a.report(map[string]string{"queue": args[0], "done": done}, "queue %s %s", args[0], done)
			}),
		})
	}
	return cmd
}

func (a *app) queueHistoryCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "history QUEUE",
		Short: "A queue's processed and failed tasks by day, over the last 30 days",
		Long: `history lists, newest first, the tasks of QUEUE that finished each day
(UTC) of the last 30, and how many of them failed, as the workers reported
them with their heartbeats.`,
		Args: cobra.ExactArgs(1),
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
			days, err := o.History(ctx, args[0])
			if err != nil {
				return err
			}
			slices.Reverse(days)
			if a.json {
				return a.printJSON(days)
			}
			t := newTable(a.stdout, "DATE", "PROCESSED", "FAILED", "FAILED %")
			for _, d := range days {
				rate := "–"
				if d.Processed > 0 {
					rate = fmt.Sprintf("%.1f", 100*float64(d.Failed)/float64(d.Processed))
				}
				t.row(d.Day.Format("2006-01-02"), strconv.Itoa(d.Processed), strconv.Itoa(d.Failed), rate)
			}
			return t.flush()
		}),
	}
}

func (a *app) queueRemoveCommand() *cobra.Command {
	var force, yes bool
	cmd := &cobra.Command{
		Use:   "rm QUEUE",
		Short: "Remove a queue: refused while it holds tasks, unless --force",
		Long: `rm removes QUEUE: what Redis keeps of it and its name from the list of
queues. A queue that holds tasks is refused unless --force, which deletes its
waiting tasks first (each gets a FAILURE state) and its archive, and asks
first unless --yes. A queue with tasks running is refused even with --force.
A worker still consuming the queue makes it again.`,
		Args: cobra.ExactArgs(1),
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
			if force && !yes {
				fmt.Fprintf(a.stderr, "remove queue %s and delete every task it holds? Type yes to go on: ", args[0])
				if !a.confirmed() {
					return usageError{fmt.Errorf("not confirmed: nothing was done")}
				}
			}
			if err := o.RemoveQueue(ctx, args[0], force); err != nil {
				return err
			}
			return a.report(map[string]string{"queue": args[0], "done": "removed"}, "queue %s removed", args[0])
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete the tasks it holds first")
	cmd.Flags().BoolVar(&yes, "yes", false, "with --force, do it without asking")
	return cmd
}

func (a *app) printQueue(q *ops.Queue, groups []*brokers.AggregationInfo) error {
	f := newFields(a.stdout)
	f.add("Queue", q.Queue)
	f.add("Paused", yesNo(q.Paused))
	for _, c := range []struct {
		name string
		n    int
	}{{"Pending", q.Pending}, {"Active", q.Active}, {"Scheduled", q.Scheduled}, {"Retry", q.Retry},
		{"Archived", q.Archived}, {"Limited", q.Limited}, {"Aggregating", q.Aggregating}, {"Completed", q.Completed}} {
		f.add(c.name, strconv.Itoa(c.n))
	}
	if len(q.Levels) > 0 {
		f.add("Pending by priority", ops.LevelCounts(q.Levels))
		f.add("Fair keys", strconv.Itoa(q.FairKeys))
	}
	f.add("Processed", fmt.Sprintf("%d in the last minute, %d in the last hour", q.Processed.Minute, q.Processed.Hour))
	f.add("Failed", fmt.Sprintf("%d in the last minute, %d in the last hour", q.Failed.Minute, q.Failed.Hour))
	if err := f.flush(); err != nil {
		return err
	}
	if len(groups) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout, "\nAggregation groups:")
	t := newTable(a.stdout, "TASK", "KEY", "SIZE", "OLDEST", "NEWEST", "DUE")
	now := time.Now()
	for _, g := range groups {
		due := "never (by its policy)"
		if !g.Due.IsZero() {
			due = ago(g.Due, now)
		}
		t.row(g.Name, g.Key, strconv.Itoa(g.Size), ago(g.Oldest, now), ago(g.Newest, now), due)
	}
	return t.flush()
}

// report prints what an action did: v as JSON, or the sentence.
func (a *app) report(v any, format string, args ...any) error {
	if a.json {
		return a.printJSON(v)
	}
	_, err := fmt.Fprintf(a.stdout, format+"\n", args...)
	return err
}

// nonNil returns s, or an empty slice for nil, so that JSON says [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
