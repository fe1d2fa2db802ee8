package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/b6192125/machinist/v1/brokers/memory"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// A worker's cycle on the broker: publish, fetch under a lease, renew it,
// settle the task.
func Example() {
	cnf := (&config.Config{LeaseDuration: 30 * time.Second}).WithDefaults()
	b := memory.New(memory.OptionsFrom(cnf))
	defer b.Close()
	ctx := context.Background()

	sig := &tasks.Signature{
		UUID:       "task_1",
		Name:       "add",
		RoutingKey: "math",
		Args:       []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}},
	}
	if err := b.Publish(ctx, sig); err != nil {
		fmt.Println(err)
		return
	}

	ds, err := b.Fetch(ctx, []string{"math"}, 10, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	d := ds[0]
	fmt.Println(d.Signature.Name, d.Signature.Args[0].Value, d.Signature.Args[1].Value, "from", d.Queue)

	_ = b.ExtendLeases(ctx, d) // while the task runs
	if err := b.Ack(ctx, d); err != nil {
		fmt.Println(err)
		return
	}
	info, _ := b.QueueInfo(ctx, "math")
	fmt.Println("pending", info.Pending, "active", info.Active)
	// Output:
	// add 1 2 from math
	// pending 0 active 0
}

// A task that fails is archived with its reason, and can be re-queued from
// the archive.
func Example_archive() {
	b := memory.New(memory.OptionsFrom((&config.Config{}).WithDefaults()))
	defer b.Close()
	ctx := context.Background()

	_ = b.Publish(ctx, &tasks.Signature{UUID: "task_2", Name: "parse", RoutingKey: "in"})
	ds, _ := b.Fetch(ctx, []string{"in"}, 1, nil)
	_ = b.Archive(ctx, ds[0], "bad input")

	dead, _ := b.ListTasks(ctx, "in", "archived", 0, 10)
	fmt.Println(dead[0].Signature.UUID, dead[0].Status, dead[0].LastError)

	n, _ := b.RequeueArchived(ctx, "in")
	pending, _ := b.GetPendingTasks("in")
	fmt.Println(n, "requeued;", len(pending), "pending")
	// Output:
	// task_2 archived bad input
	// 1 requeued; 1 pending
}
