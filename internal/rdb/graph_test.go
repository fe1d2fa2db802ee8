package rdb

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// recordDAG records dag's graph on s, its nodes on queue "q", and
// returns the workflow with its signatures by key.
func recordDAG(t *testing.T, s *Store, dag *tasks.DAG) (*tasks.Workflow, map[string]*tasks.Signature) {
	t.Helper()
	wf, err := dag.Build()
	if err != nil {
		t.Fatal(err)
	}
	nodes := wf.Nodes()
	byKey := map[string]*tasks.Signature{}
	for _, n := range nodes {
		n.Signature.RoutingKey = "q"
		byKey[n.Key] = n.Signature
	}
	if err := s.RecordGraph(context.Background(), &store.Graph{ID: wf.ID, Nodes: nodes, Outputs: wf.Outputs()}); err != nil {
		t.Fatal(err)
	}
	return wf, byKey
}

func graphStore(t *testing.T) *Store {
	t.Helper()
	srv := redistest.Shared(t)
	s := New(srv.Client(t), Options{KeyPrefix: srv.Prefix(t), ResultsExpireIn: time.Hour, LeaseDuration: 10 * time.Second,
		ArchiveMaxAge: time.Hour, ArchiveMaxSize: 10}, false)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func uuids(sigs []*tasks.Signature) []string {
	var out []string
	for _, s := range sigs {
		out = append(out, s.UUID)
	}
	return out
}

// A failure that fails the workflow, recorded again (the node's task
// finished again after a recovery), returns what to stop again; another
// node's failure afterwards returns nothing.
func TestFailGraphAgainReturnsTheSameNodes(t *testing.T) {
	t.Parallel()
	s := graphStore(t)
	ctx := context.Background()
	wf, n := recordDAG(t, s, tasks.NewDAG("fail").
		Add("a", &tasks.Signature{Name: "a"}).
		Add("b", &tasks.Signature{Name: "b"}).
		Add("c", &tasks.Signature{Name: "c"}, "a", "b"))
	first, err := s.FailGraph(ctx, wf.ID, "a", "boom")
	if err != nil {
		t.Fatal(err)
	}
	if !first.Failed || !slices.Equal(uuids(first.Open), []string{n["b"].UUID}) || !slices.Equal(uuids(first.Unsent), []string{n["c"].UUID}) ||
		first.Unsent[0].Name != "c" || first.Unsent[0].WorkflowNode != "c" {
		t.Fatalf("first failure: %+v, open %v, unsent %+v; want b open and c unsent", first, uuids(first.Open), first.Unsent)
	}
	again, err := s.FailGraph(ctx, wf.ID, "a", "boom")
	if err != nil || !again.Failed || !slices.Equal(uuids(again.Open), uuids(first.Open)) || !slices.Equal(uuids(again.Unsent), uuids(first.Unsent)) {
		t.Fatalf("the same failure again: %+v, %v; want the same nodes", again, err)
	}
	other, err := s.FailGraph(ctx, wf.ID, "b", "later")
	if err != nil || other.Failed || len(other.Open)+len(other.Unsent) != 0 {
		t.Fatalf("another node's failure after: %+v, %v; want nothing", other, err)
	}
	st, err := s.GraphStatus(ctx, wf.ID)
	if err != nil || st.State != tasks.StateFailure || st.FailedNode != "a" || st.Error != "boom" {
		t.Fatalf("status %+v, %v; want FAILURE at a: boom", st, err)
	}
}

// A node allowed to fail with RunNextAtOnce releases its successor at
// once, and again when recorded again; the successor's other dep,
// finishing later, does not release it.
func TestAllowedFailureReleasesAtOnceOnce(t *testing.T) {
	t.Parallel()
	s := graphStore(t)
	ctx := context.Background()
	wf, n := recordDAG(t, s, tasks.NewDAG("at-once").
		Add("a", tasks.AllowFailure(&tasks.Signature{Name: "a"}, tasks.RunNextAtOnce)).
		Add("b", &tasks.Signature{Name: "b"}).
		Add("c", &tasks.Signature{Name: "c"}, "a", "b"))
	for i := range 2 {
		f, err := s.FailGraph(ctx, wf.ID, "a", "down")
		if err != nil || !f.Allowed || !slices.Equal(uuids(f.Ready), []string{n["c"].UUID}) {
			t.Fatalf("failure %d of a: %+v, %v; want c ready", i+1, f, err)
		}
	}
	next, err := s.NodeSucceeded(ctx, n["b"], []*tasks.TaskResult{{Type: "int64", Value: 1}})
	if err != nil || len(next) != 0 {
		t.Fatalf("b's success after c was released: %v, %v; want nothing released", uuids(next), err)
	}
	if _, err := s.NodeSucceeded(ctx, n["c"], nil); err != nil {
		t.Fatal(err)
	}
	st, err := s.GraphStatus(ctx, wf.ID)
	if err != nil || st.State != tasks.StateSuccess || st.Succeeded != 2 || st.Failed != 1 {
		t.Fatalf("status %+v, %v; want SUCCESS, 2 succeeded, 1 failed", st, err)
	}
	// Every key of the graph expires, the res hash written by the
	// scripts too.
	for _, key := range s.keys.graph(wf.ID).all() {
		if ttl, err := s.client.PTTL(ctx, key).Result(); err != nil || ttl <= 0 {
			t.Fatalf("PTTL %s: %v, %v; want a TTL", key, ttl, err)
		}
	}
}
