package machinery_test

import (
	"context"
	"errors"
	"testing"

	machinery "github.com/b6192125/machinist/v1"
	eagerbackend "github.com/b6192125/machinist/v1/backends/eager"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/null"
	"github.com/b6192125/machinist/v1/backends/result"
	eagerbroker "github.com/b6192125/machinist/v1/brokers/eager"
	"github.com/b6192125/machinist/v1/config"
	eagerlock "github.com/b6192125/machinist/v1/locks/eager"
	"github.com/b6192125/machinist/v1/tasks"
)

// A Server built the way machinery programs build theirs in unit tests,
// on the eager broker and backend, runs each task as it is sent: its
// result is there when the send returns.
func TestEagerBrokerAndBackend(t *testing.T) {
	server := machinery.NewServerWithBrokerBackendLock(&config.Config{DefaultQueue: "tests"}, eagerbroker.New(), eagerbackend.New(), eagerlock.New())
	defer server.Close()
	ran := 0
	if err := server.RegisterTask("add", func(a, b int64) (int64, error) { ran++; return a + b, nil }); err != nil {
		t.Fatal(err)
	}
	res, err := server.SendTask(&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 2}, {Type: "int64", Value: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if ran != 1 {
		t.Fatalf("the task ran %d times by the time the send returned, want once", ran)
	}
	st, err := server.GetBackend().GetState(res.Signature.UUID)
	if err != nil || !st.IsSuccess() {
		t.Fatalf("state after the send: %+v, %v; want SUCCESS", st, err)
	}
	if n, err := result.Get1[int64](context.Background(), res); err != nil || n != 5 {
		t.Fatalf("result: %v, %v; want 5", n, err)
	}
}

// On the null backend tasks run but no state is kept: reading one fails
// as for a task never sent, and a group counts as completed once known.
func TestNullBackend(t *testing.T) {
	server := machinery.NewServerWithBrokerBackendLock(&config.Config{DefaultQueue: "tests"}, eagerbroker.New(), null.New(), eagerlock.New())
	defer server.Close()
	ran := 0
	if err := server.RegisterTask("add", func(a, b int64) (int64, error) { ran++; return a + b, nil }); err != nil {
		t.Fatal(err)
	}
	res, err := server.SendTask(&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 2}, {Type: "int64", Value: 3}}})
	if err != nil || ran != 1 {
		t.Fatalf("send on the null backend: %v, ran %d times; want it run once", err, ran)
	}
	b := server.GetBackend()
	if _, err := b.GetState(res.Signature.UUID); !errors.Is(err, backends.ErrStateNotFound) {
		t.Fatalf("GetState on the null backend: %v, want ErrStateNotFound", err)
	}
	if done, err := b.GroupCompleted("group_x", 2); err == nil || done {
		t.Fatalf("GroupCompleted of an unknown group: %v, %v; want an error", done, err)
	}
	if err := b.InitGroup("group_x", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if done, err := b.GroupCompleted("group_x", 2); err != nil || !done {
		t.Fatalf("GroupCompleted of a known group: %v, %v; want true", done, err)
	}
}
