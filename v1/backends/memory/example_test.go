package memory_test

import (
	"context"
	"fmt"

	"github.com/b6192125/machinist/v1/backends/memory"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// A chord's bookkeeping: members record their final states as they finish,
// the one that completes the group is elected to send the callback.
func Example() {
	be := memory.New(memory.OptionsFrom((&config.Config{}).WithDefaults()))
	defer be.Close()
	ctx := context.Background()

	group, _ := tasks.NewGroup(
		&tasks.Signature{UUID: "task_a", Name: "double"},
		&tasks.Signature{UUID: "task_b", Name: "double"},
	)
	_ = be.InitGroupContext(ctx, group.GroupUUID, group.GetUUIDs())

	for i, sig := range []*tasks.Signature{group.Tasks[1], group.Tasks[0]} { // finish out of order
		_ = be.SetStateSuccessContext(ctx, sig, []*tasks.TaskResult{{Type: "int64", Value: int64(10 * (i + 1))}})
		done, _ := be.GroupCompletedContext(ctx, group.GroupUUID, len(group.Tasks))
		fmt.Println(sig.UUID, "finished; group completed:", done)
		if done {
			first, _ := be.TriggerChordContext(ctx, group.GroupUUID, sig.UUID)
			fmt.Println(sig.UUID, "sends the callback:", first)
		}
	}

	states, _ := be.GroupTaskStatesContext(ctx, group.GroupUUID, len(group.Tasks))
	for _, st := range states {
		fmt.Println(st.TaskUUID, st.State, st.Results[0].Value)
	}
	// Output:
	// task_b finished; group completed: false
	// task_a finished; group completed: true
	// task_a sends the callback: true
	// task_a SUCCESS 20
	// task_b SUCCESS 10
}
