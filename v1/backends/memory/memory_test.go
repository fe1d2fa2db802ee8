package memory_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/v1/backends/backendtest"
	"github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/memory"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	backendtest.Exercise(t, func(t *testing.T, cnf *config.Config) iface.Backend {
		b := memory.New(memory.OptionsFrom(cnf))
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
}

// The memory backend keeps result values as the task returned them: no JSON
// round trip turns an int64 into a float64.
func TestResultValuesKeptAsTheyAre(t *testing.T) {
	t.Parallel()
	b := memory.New(memory.OptionsFrom(nil))
	defer b.Close()
	ctx := context.Background()
	sig := &tasks.Signature{UUID: "task_1", Name: "n"}
	if err := b.SetStateSuccessContext(ctx, sig, []*tasks.TaskResult{
		{Type: "int64", Value: int64(7)},
		{Type: "[]interface {}", Value: []interface{}{[]int{1}, map[string]int{"a": 1}}},
	}); err != nil {
		t.Fatal(err)
	}
	st, err := b.GetStateContext(ctx, "task_1")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := st.Results[0].Value.(int64); !ok || v != 7 {
		t.Fatalf("Results[0].Value = %#v, want int64(7)", st.Results[0].Value)
	}
	nested := st.Results[1].Value.([]interface{})
	nested[0].([]int)[0] = 99
	nested[1].(map[string]int)["a"] = 99
	again, _ := b.GetStateContext(ctx, "task_1")
	inner := again.Results[1].Value.([]interface{})
	if inner[0].([]int)[0] != 1 || inner[1].(map[string]int)["a"] != 1 {
		t.Fatalf("a reader changed the stored nested values: %#v", inner)
	}
}
