package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// graphNode is a node of a workflow's graph as its nodes hash holds it
// (lua/lib/graph.lua reads it): its task's id, queue (the shard, for a
// sharded queue), stored message, ETA and limit, the keys of its deps
// and of its successors, and whether it is Immutable (its deps' results
// are not added to it).
type graphNode struct {
	UUID      string   `json:"u"`
	Queue     string   `json:"q"`
	Msg       string   `json:"m"`
	ETA       int64    `json:"e,omitempty"` // ms
	Limit     string   `json:"l,omitempty"` // limitItem's
	Deps      []string `json:"d,omitempty"`
	Succ      []string `json:"s,omitempty"`
	Immutable bool     `json:"i,omitempty"`
}

// RecordGraph writes the graph g, whose signatures are ready to travel
// (UUID, RoutingKey): its record (graph hash), each
// node's message and links (nodes hash) and how many deps each node waits
// for (wait hash), in one pipeline of the workflow's slot. The keys live
// for the group safety TTL past g's last ETA, and each node's success or
// failure extends them (graph_done.lua).
func (s *Store) RecordGraph(ctx context.Context, g *store.Graph) error {
	nodes := g.Nodes
	if len(nodes) == 0 || g.ID == "" {
		return errors.New("record workflow: no nodes or no ID")
	}
	if err := validGroup(g.ID); err != nil {
		return fmt.Errorf("record workflow: %w", err)
	}
	records := make([]interface{}, 0, 2*len(nodes))
	var wait []interface{}
	succ := make(map[string][]string, len(nodes))
	for _, n := range nodes {
		for _, d := range n.Deps {
			succ[d] = append(succ[d], n.Key)
		}
	}
	var lastETA int64
	// The graph hash says where released nodes go, for the settle that
	// sends them (ack_success.lua): each queue's keys, and the prefix of
	// the state keys.
	meta := []interface{}{"state", tasks.StatePending, "nodes", len(nodes), "done", 0,
		"name", g.Name, "created_at", formatTime(time.Now()), "sp", s.keys.state("")}
	queues := make(map[string]bool)
	for _, n := range nodes {
		sig := n.Signature
		msg, err := s.message(sig)
		if err != nil {
			return fmt.Errorf("record workflow %s: %w", g.ID, err)
		}
		node := graphNode{UUID: sig.UUID, Msg: string(msg), Deps: n.Deps, Succ: succ[n.Key], Immutable: sig.Immutable}
		if sig.ETA != nil {
			node.ETA = msOf(*sig.ETA)
			lastETA = max(lastETA, node.ETA)
		}
		if node.Queue, err = s.route(ctx, sig); err != nil {
			return fmt.Errorf("record workflow %s: node %q: %w", g.ID, n.Key, err)
		}
		qk := s.keys.queue(node.Queue)
		if node.Limit, err = limitItem(qk, sig.Limit); err != nil {
			return fmt.Errorf("record workflow %s: node %q: %w", g.ID, n.Key, err)
		}
		if !queues[node.Queue] {
			queues[node.Queue] = true
			if err := s.registerQueue(ctx, node.Queue); err != nil {
				return fmt.Errorf("record workflow %s: %w", g.ID, err)
			}
			keys, err := json.Marshal([]string{qk.pending, qk.scheduled, qk.archived, qk.notify, qk.task})
			if err != nil {
				return fmt.Errorf("record workflow %s: %w", g.ID, err)
			}
			meta = append(meta, "q:"+node.Queue, keys)
		}
		raw, err := json.Marshal(node)
		if err != nil {
			return fmt.Errorf("record workflow %s: %w", g.ID, err)
		}
		records = append(records, n.Key, raw)
		if len(n.Deps) > 0 {
			wait = append(wait, n.Key, len(n.Deps))
		}
	}
	outputs, err := json.Marshal(g.Outputs)
	if err != nil {
		return fmt.Errorf("record workflow %s: %w", g.ID, err)
	}
	var first []string
	for _, n := range nodes {
		if len(n.Deps) == 0 {
			first = append(first, n.Key)
		}
	}
	firstJSON, err := json.Marshal(first)
	if err != nil {
		return fmt.Errorf("record workflow %s: %w", g.ID, err)
	}
	meta = append(meta, "outputs", outputs, "first", firstJSON)
	ttl := s.graphTTL(lastETA)
	gk := s.keys.graph(g.ID)
	err = transport.Again(ctx, func() error {
		return s.batch.Do(ctx, g.ID, func(pipe goredis.Pipeliner) []goredis.Cmder {
			cmds := []goredis.Cmder{
				pipe.HSet(ctx, gk.meta, meta...),
				pipe.HSet(ctx, gk.nodes, records...),
				pipe.PExpire(ctx, gk.meta, ttl),
				pipe.PExpire(ctx, gk.nodes, ttl),
			}
			if len(wait) > 0 {
				cmds = append(cmds, pipe.HSet(ctx, gk.wait, wait...), pipe.PExpire(ctx, gk.wait, ttl))
			}
			return cmds
		})
	}, transport.Retry{})
	if err != nil {
		return fmt.Errorf("record workflow %s: %w", g.ID, err)
	}
	return nil
}

// graphTTL is how long a graph's keys live from now: the group safety TTL
// (a node may run for long), past lastETA (ms) when it is later.
func (s *Store) graphTTL(lastETA int64) time.Duration {
	ttl := s.groupTTL()
	if until := time.Duration(lastETA-msOf(time.Now())) * time.Millisecond; until > 0 {
		ttl += until
	}
	return ttl
}

// WithdrawGraph queues the deletion of the graph of workflow id, recorded
// for a send that then failed having published nothing, after what its
// lane holds now (see WithdrawWorkflow), and returns without waiting.
func (s *Store) WithdrawGraph(id string) error {
	gk := s.keys.graph(id)
	del := func(pipe goredis.Pipeliner) []goredis.Cmder {
		return []goredis.Cmder{pipe.Del(context.Background(), gk.meta, gk.nodes, gk.wait, gk.res)}
	}
	if !s.batch.Go(id, del, s.logWithdrawal("workflow_id", id)) {
		return fmt.Errorf("withdraw workflow %s: %w", id, transport.ErrClosed)
	}
	return nil
}

// graphReadyItems is how many items lib/graph.lua's graph_ready gives per
// node: id, queue, message, ETA and limit.
const graphReadyItems = 5

// NodeSucceeded records that sig, a node of its workflow's graph,
// succeeded with results, and returns the nodes that follow it and are
// ready, with their deps' results in their args (graph_done.lua): those
// its success released or, when it was recorded before (the task finished
// again after a recovery), all of its successors that are ready. A
// workflow that failed or was cancelled releases none. A graph that is
// gone (expired): an error wrapping store.ErrWorkflowNotFound.
func (s *Store) NodeSucceeded(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) ([]*tasks.Signature, error) {
	if results == nil {
		results = []*tasks.TaskResult{}
	}
	raw, err := json.Marshal(results)
	if err != nil {
		return nil, fmt.Errorf("record success of workflow node %s: %w", sig.WorkflowNode, err)
	}
	id := sig.WorkflowUUID
	reply, err := s.batch.RunScript(ctx, id, graphDoneScript, s.keys.graph(id).all(),
		sig.WorkflowNode, raw, s.graphTTL(0).Milliseconds()).Result()
	if err != nil {
		return nil, fmt.Errorf("record success of node %q of workflow %s: %w", sig.WorkflowNode, id, err)
	}
	items, ok := reply.([]interface{})
	if !ok {
		return nil, fmt.Errorf("record success of node %q of workflow %s: %w", sig.WorkflowNode, id, store.ErrWorkflowNotFound)
	}
	if len(items) == 0 || (len(items)-1)%graphReadyItems != 0 {
		return nil, malformed("graph_done", nil, "%d items, not a count and 5 items per node", len(items))
	}
	next := make([]*tasks.Signature, 0, (len(items)-1)/graphReadyItems)
	for i := 1; i < len(items); i += graphReadyItems {
		uuid, _ := items[i].(string)
		queue, _ := items[i+1].(string)
		msg, _ := items[i+2].(string)
		n, err := decodeStored(msg, uuid, queue)
		if err != nil {
			return nil, fmt.Errorf("release node %s of workflow %s: %w", uuid, id, err)
		}
		next = append(next, n)
	}
	return next, nil
}

// FailGraph fails the graph of workflow id (graph_fail.lua): node failed
// for good with reason, or, with node "", the workflow was cancelled. No
// node is released after it. It returns the nodes sent and not finished
// (but node), each as a signature naming it (UUID, queue, workflow,
// node), when this call failed the graph; none when it was final
// already. One that is gone: an error wrapping store.ErrWorkflowNotFound.
func (s *Store) FailGraph(ctx context.Context, id, node, reason string) ([]*tasks.Signature, error) {
	reply, err := s.batch.RunScript(ctx, id, graphFailScript, s.keys.graph(id).all(),
		node, reason, s.graphTTL(0).Milliseconds()).Result()
	if err != nil {
		return nil, fmt.Errorf("fail workflow %s: %w", id, err)
	}
	items, ok := reply.([]interface{})
	if !ok {
		if code, _ := reply.(int64); code < 0 {
			return nil, fmt.Errorf("fail workflow %s: %w", id, store.ErrWorkflowNotFound)
		}
		return nil, nil
	}
	if len(items)%2 != 1 {
		return nil, malformed("graph_fail", nil, "%d items, not a status and id, queue pairs", len(items))
	}
	var open []*tasks.Signature
	for i := 1; i < len(items); i += 2 {
		uuid, _ := items[i].(string)
		queue, _ := items[i+1].(string)
		open = append(open, &tasks.Signature{UUID: uuid, RoutingKey: queue, WorkflowUUID: id})
	}
	return open, nil
}

// GraphStatus returns where the workflow id, of any shape, stands, with
// the results of its outputs once it succeeded. A graph that is gone (or
// a workflow sent as a flat chain, group or chord): an error wrapping
// store.ErrWorkflowNotFound.
func (s *Store) GraphStatus(ctx context.Context, id string) (*tasks.WorkflowStatus, error) {
	gk := s.keys.graph(id)
	vals, err := s.client.HMGet(ctx, gk.meta, "state", "nodes", "done", "name", "failed", "error", "outputs").Result()
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", id, err)
	}
	field := func(i int) string { v, _ := vals[i].(string); return v }
	if field(0) == "" {
		return nil, fmt.Errorf("workflow %s: %w", id, store.ErrWorkflowNotFound)
	}
	st := &tasks.WorkflowStatus{WorkflowUUID: id, State: field(0), Name: field(3), FailedNode: field(4), Error: field(5)}
	st.Nodes, _ = strconv.Atoi(field(1))
	st.Succeeded, _ = strconv.Atoi(field(2))
	if st.State != tasks.StateSuccess {
		return st, nil
	}
	var outputs []string
	if err := decodeJSON(field(6), &outputs); err != nil {
		return nil, fmt.Errorf("workflow %s: decode outputs: %w", id, err)
	}
	raws, err := s.client.HMGet(ctx, gk.res, outputs...).Result()
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", id, err)
	}
	for i, r := range raws {
		raw, ok := r.(string)
		if !ok {
			return nil, fmt.Errorf("workflow %s: the results of output %q are gone", id, outputs[i])
		}
		var results []*tasks.TaskResult
		if err := decodeJSON(raw, &results); err != nil {
			return nil, fmt.Errorf("workflow %s: decode results of %q: %w", id, outputs[i], err)
		}
		st.Results = append(st.Results, results...)
	}
	return st, nil
}
