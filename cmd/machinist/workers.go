package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/b6192125/machinist/internal/ops"
)

func (a *app) workersCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "workers",
		Short: "The worker processes alive, from their heartbeats",
		Long: `workers lists the worker processes alive, as their heartbeats (every
LeaseRenewInterval) report them: host, process id, consumer tag, queues,
concurrency, tasks in flight, registered task names, when each started and
when it was last heard from. A worker is listed until a LeaseDuration after
its last heartbeat, or until it stops.`,
		Args: cobra.NoArgs,
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, _ []string) error {
			ws, err := o.Workers(ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(nonNil(ws))
			}
			if len(ws) == 0 {
				fmt.Fprintln(a.stdout, "no workers alive")
				return nil
			}
			t := newTable(a.stdout, "HOST", "PID", "TAG", "QUEUES", "CONCURRENCY", "IN FLIGHT", "STARTED", "LAST SEEN", "TASK NAMES")
			now := time.Now()
			for _, w := range ws {
				t.row(w.Host, strconv.Itoa(w.PID), w.Tag, strings.Join(w.Queues, ","), strconv.Itoa(w.Concurrency),
					strconv.Itoa(len(w.Running)), stamp(w.StartedAt), ago(w.Seen, now), names(w.Names, 60))
			}
			return t.flush()
		}),
	}
}

// names joins task names, clipped to about n characters with a count of
// those left out.
func names(ns []string, n int) string {
	var b strings.Builder
	for i, name := range ns {
		if b.Len()+len(name) > n && i > 0 {
			fmt.Fprintf(&b, " +%d", len(ns)-i)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(name)
	}
	return b.String()
}
