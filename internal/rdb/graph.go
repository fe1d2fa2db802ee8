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
// (lua/lib/graph.lua and graph_fail.lua read it): its task's id, name,
// queue (the shard, for a sharded queue), stored message, ETA, limit and band,
// the keys of its deps and of its successors, whether it is Immutable
// (its deps' results are not added to it), whether it may fail
// (tasks.AllowFailure: 1, or 2 with RunNextAtOnce) and whether it has
// OnError callbacks.
type graphNode struct {
	UUID      string   `json:"u"`
	Name      string   `json:"n"`
	Queue     string   `json:"q"`
	Msg       string   `json:"m"`
	ETA       int64    `json:"e,omitempty"` // ms
	Limit     string   `json:"l,omitempty"` // limitItem's
	Band      string   `json:"b,omitempty"` // bandItem's
	Deps      []string `json:"d,omitempty"`
	Succ      []string `json:"s,omitempty"`
	Immutable bool     `json:"i,omitempty"`
	MayFail   int      `json:"f,omitempty"`
	OnError   bool     `json:"o,omitempty"`
}

// RecordGraph writes the graph g, whose signatures are ready to travel
// (UUID, RoutingKey): its record (graph hash), each
// node's message and links (nodes hash) and how many deps each node waits
// for (wait hash), and an empty res hash, in one pipeline of the
// workflow's slot. The keys live for the group safety TTL past g's last
// ETA, and the nodes' successes and failures extend them (graph_done.lua).
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
		node := graphNode{UUID: sig.UUID, Name: sig.Name, Msg: string(msg), Deps: n.Deps, Succ: succ[n.Key],
			Immutable: sig.Immutable, OnError: len(sig.OnError) > 0}
		switch {
		case n.RunNextAtOnce:
			node.MayFail = 2
		case n.AllowFailure:
			node.MayFail = 1
		}
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
		if node.Band, err = bandItem(sig); err != nil {
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
	if g.CancelOnFailure {
		meta = append(meta, "cf", 1)
	}
	ttl := s.graphTTL(lastETA)
	gk := s.keys.graph(g.ID)
	err = transport.Again(ctx, func() error {
		return s.batch.Do(ctx, g.ID, func(pipe goredis.Pipeliner) []goredis.Cmder {
			// The res hash is made now, with a field no node has (keys
			// are never empty), so that it has its TTL from the start:
			// lib/keep.lua's keep_alive extends the four keys together.
			cmds := []goredis.Cmder{
				pipe.HSet(ctx, gk.meta, meta...),
				pipe.HSet(ctx, gk.nodes, records...),
				pipe.HSet(ctx, gk.res, "", ""),
				pipe.PExpire(ctx, gk.meta, ttl),
				pipe.PExpire(ctx, gk.nodes, ttl),
				pipe.PExpire(ctx, gk.res, ttl),
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
// node: id, queue, message, ETA, limit and band.
const graphReadyItems = 6

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
	return s.readyNodes("graph_done", id, items)
}

// readyNodes decodes the nodes of workflow id that script's reply, items,
// says are ready: a status, then graph_ready's items for each.
func (s *Store) readyNodes(script, id string, items []interface{}) ([]*tasks.Signature, error) {
	if len(items) == 0 || (len(items)-1)%graphReadyItems != 0 {
		return nil, malformed(script, nil, "%d items, not a status and %d items per node", len(items), graphReadyItems)
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

// FailGraph records that node of workflow id failed for good with
// reason, or, with node "", that the workflow was cancelled
// (graph_fail.lua); see store.Graphs. One that is gone: an error wrapping
// store.ErrWorkflowNotFound.
func (s *Store) FailGraph(ctx context.Context, id, node, reason string) (*store.GraphFailure, error) {
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
		return &store.GraphFailure{}, nil
	}
	if code, _ := items[0].(int64); code == 2 {
		ready, err := s.readyNodes("graph_fail", id, items)
		if err != nil {
			return nil, err
		}
		return &store.GraphFailure{Allowed: true, Ready: ready}, nil
	}
	if len(items) < 3 {
		return nil, malformed("graph_fail", nil, "%d items, not a status, a flag and a count", len(items))
	}
	cancel, _ := items[1].(int64)
	n, _ := items[2].(int64)
	rest := items[3:]
	if n < 0 || int(2*n) > len(rest) || (len(rest)-int(2*n))%4 != 0 {
		return nil, malformed("graph_fail", nil, "%d items for %d nodes sent, not id, queue pairs then 4 items per node not sent", len(rest), n)
	}
	f := &store.GraphFailure{Failed: true, CancelRunning: cancel == 1}
	for i := 0; i < int(2*n); i += 2 {
		uuid, _ := rest[i].(string)
		queue, _ := rest[i+1].(string)
		f.Open = append(f.Open, &tasks.Signature{UUID: uuid, RoutingKey: queue, WorkflowUUID: id})
	}
	for i := int(2 * n); i < len(rest); i += 4 {
		key, _ := rest[i].(string)
		uuid, _ := rest[i+1].(string)
		name, _ := rest[i+2].(string)
		msg, _ := rest[i+3].(string)
		sig := &tasks.Signature{UUID: uuid, Name: name}
		if msg != "" {
			if sig, err = decodeStored(msg, uuid, ""); err != nil {
				return nil, fmt.Errorf("fail workflow %s: node %q: %w", id, key, err)
			}
		}
		sig.WorkflowUUID, sig.WorkflowNode = id, key
		f.Unsent = append(f.Unsent, sig)
	}
	return f, nil
}

// GraphStatus returns where the workflow id, of any shape, stands, with
// the results of its outputs once it succeeded. A graph that is gone (or
// a workflow sent as a flat chain, group or chord): an error wrapping
// store.ErrWorkflowNotFound.
func (s *Store) GraphStatus(ctx context.Context, id string) (*tasks.WorkflowStatus, error) {
	gk := s.keys.graph(id)
	vals, err := s.client.HMGet(ctx, gk.meta, "state", "nodes", "done", "name", "failed", "error", "outputs", "allowed").Result()
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", id, err)
	}
	field := func(i int) string { v, _ := vals[i].(string); return v }
	if field(0) == "" {
		return nil, fmt.Errorf("workflow %s: %w", id, store.ErrWorkflowNotFound)
	}
	st := &tasks.WorkflowStatus{WorkflowUUID: id, State: field(0), Name: field(3), FailedNode: field(4), Error: field(5)}
	st.Nodes, _ = strconv.Atoi(field(1))
	done, _ := strconv.Atoi(field(2))
	st.Failed, _ = strconv.Atoi(field(7))
	st.Succeeded = done - st.Failed
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
