package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/b6192125/machinist/internal/ops"
)

func (a *app) periodicCommand() *cobra.Command {
	cmd := parent("periodic", "List the periodic tasks")
	cmd.AddCommand(&cobra.Command{
		Use:   "ls",
		Short: "List the periodic tasks: spec, tasks, queues, next and last run, and its outcome",
		Long: `ls lists the periodic tasks, chains, groups and chords the processes
registered (RegisterPeriodicTask and its kin), as the last one to register
each recorded it: its spec, its tasks and their queues, when it runs next by
its spec, when its last tick was sent and how that tick ended (the state of
its task, its chain's last task or its chord's callback; its group's states
counted). An entry no process registers any more stays listed, with the
time it was last registered.`,
		Args: cobra.NoArgs,
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, _ []string) error {
			entries, err := o.Periodic(ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(entries)
			}
			now := time.Now()
			t := newTable(a.stdout, "NAME", "SPEC", "KIND", "TASKS", "QUEUES", "NEXT", "LAST", "OUTCOME", "REGISTERED")
			for _, e := range entries {
				last, outcome := "never", e.Outcome
				if !e.Last.At.IsZero() {
					last = ago(e.Last.At, now)
				}
				if outcome == "" {
					outcome = "–"
				}
				next := "–"
				if !e.Next.IsZero() {
					next = ago(e.Next, now)
				}
				t.row(e.Name, e.Spec, e.Kind, strings.Join(e.Tasks, ", "), strings.Join(e.Queues, ", "), next, last, outcome,
					ago(e.Registered, now)+" by "+e.Host)
			}
			return t.flush()
		}),
	})
	return cmd
}
