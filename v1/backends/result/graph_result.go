package result

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// WorkflowReader reads where a workflow of any shape stands (the Server's
// store does).
type WorkflowReader interface {
	// GraphStatus returns the status of workflow id, or an error wrapping
	// ErrWorkflowNotFound (brokers/iface) when there is none.
	GraphStatus(ctx context.Context, id string) (*tasks.WorkflowStatus, error)
	// GetWorkflowContext returns the record of workflow id: its nodes.
	GetWorkflowContext(ctx context.Context, id string) (*tasks.WorkflowMeta, error)
	// GetStateContext returns the state of task uuid, or an error
	// wrapping ErrStateNotFound (backends/iface).
	GetStateContext(ctx context.Context, uuid string) (*tasks.TaskState, error)
	// WatchGraph returns a channel that receives when workflow id may
	// have become final, and the function that stops the watch; a nil
	// channel where the store cannot watch.
	WatchGraph(ctx context.Context, id string) (notices <-chan struct{}, stop func())
}

// NodeState is a node of a workflow of any shape, with its task's state.
type NodeState struct {
	// Key, UUID and Deps are the node's (tasks.WorkflowNode).
	Key, UUID string
	Deps      []string
	// State is its task's state (PENDING until it starts; its error and
	// results once it finished); nil when the backend has none any more.
	State *tasks.TaskState
}

// WorkflowError is the error of a workflow that failed: a node failed for
// good (Node names it), or the workflow was cancelled (Node is empty).
type WorkflowError struct {
	WorkflowUUID string
	Node         string
	Message      string
}

func (e *WorkflowError) Error() string {
	if e.Node == "" {
		return fmt.Sprintf("workflow %s failed: %s", e.WorkflowUUID, e.Message)
	}
	return fmt.Sprintf("workflow %s failed at node %q: %s", e.WorkflowUUID, e.Node, e.Message)
}

// Unwrap returns tasks.ErrTaskCancelled for a cancelled workflow or node,
// else nil.
func (e *WorkflowError) Unwrap() error {
	if strings.HasPrefix(e.Message, tasks.CancelledMessage) {
		return tasks.ErrTaskCancelled
	}
	return nil
}

// WorkflowAsyncResult is the handle of a workflow of any shape
// (Server.SendWorkflowWithContext). Any process can make one from the
// workflow's ID (Server.GetWorkflowResult).
type WorkflowAsyncResult struct {
	WorkflowUUID string
	reader       WorkflowReader
}

// NewWorkflowAsyncResult returns the handle of workflow id, read through
// reader.
func NewWorkflowAsyncResult(id string, reader WorkflowReader) *WorkflowAsyncResult {
	return &WorkflowAsyncResult{WorkflowUUID: id, reader: reader}
}

// Status reads where the workflow stands once.
func (r *WorkflowAsyncResult) Status(ctx context.Context) (*tasks.WorkflowStatus, error) {
	if r.reader == nil {
		return nil, ErrBackendNotConfigured
	}
	st, err := r.reader.GraphStatus(ctx, r.WorkflowUUID)
	if err != nil {
		return nil, fmt.Errorf("result of workflow %s: %w", r.WorkflowUUID, err)
	}
	return st, nil
}

// Nodes reads the states of limit of the workflow's nodes from offset,
// in the order of tasks.Workflow.Nodes (each after its deps), and returns
// them with the number of nodes in all. It reads the workflow's record
// and one state per node returned, so that a large workflow is read a
// page at a time.
func (r *WorkflowAsyncResult) Nodes(ctx context.Context, offset, limit int) ([]NodeState, int, error) {
	if r.reader == nil {
		return nil, 0, ErrBackendNotConfigured
	}
	if offset < 0 || limit < 1 {
		return nil, 0, fmt.Errorf("nodes of workflow %s: a page of %d from %d (want a limit of at least 1 from 0 or more)", r.WorkflowUUID, limit, offset)
	}
	meta, err := r.reader.GetWorkflowContext(ctx, r.WorkflowUUID)
	if err != nil {
		return nil, 0, fmt.Errorf("nodes of workflow %s: %w", r.WorkflowUUID, err)
	}
	total := len(meta.Tasks)
	if offset >= total {
		return nil, total, nil
	}
	page := meta.Tasks[offset:min(offset+limit, total)]
	out := make([]NodeState, len(page))
	for i, t := range page {
		out[i] = NodeState{Key: t.Node, UUID: t.UUID, Deps: t.Deps}
		st, err := r.reader.GetStateContext(ctx, t.UUID)
		switch {
		case err == nil:
			out[i].State = st
		case !errors.Is(err, backends.ErrStateNotFound):
			return nil, 0, fmt.Errorf("nodes of workflow %s: node %q: %w", r.WorkflowUUID, t.Node, err)
		}
	}
	return out, total, nil
}

// Touch reads the workflow's status once: it returns the results of its
// outputs (Workflow.Outputs), one after the other, when it succeeded, a
// *WorkflowError when it failed, and (nil, nil) while it runs.
func (r *WorkflowAsyncResult) Touch(ctx context.Context) ([]reflect.Value, error) {
	st, err := r.Status(ctx)
	if err != nil {
		return nil, err
	}
	switch st.State {
	case tasks.StateSuccess:
		values, err := tasks.ReflectTaskResults(st.Results)
		if values == nil && err == nil {
			values = []reflect.Value{} // done, with no results
		}
		return values, err
	case tasks.StateFailure:
		return nil, &WorkflowError{WorkflowUUID: r.WorkflowUUID, Node: st.FailedNode, Message: st.Error}
	}
	return nil, nil
}

// Get waits for the workflow to end, reading its status every
// sleepDuration, and at once when the store says it ended (on one Redis
// server and the embedded engine), and returns the results of its
// outputs or its error. It waits for as long as the workflow runs:
// GetWithContext bounds the wait.
func (r *WorkflowAsyncResult) Get(sleepDuration time.Duration) ([]reflect.Value, error) {
	return r.GetWithContext(context.Background(), sleepDuration)
}

// GetWithTimeout is Get that gives up with ErrTimeoutReached after
// timeoutDuration.
func (r *WorkflowAsyncResult) GetWithTimeout(timeoutDuration, sleepDuration time.Duration) ([]reflect.Value, error) {
	return withTimeout(timeoutDuration, sleepDuration, r.GetWithContext)
}

// GetWithContext is Get that gives up with ctx's error when ctx ends.
func (r *WorkflowAsyncResult) GetWithContext(ctx context.Context, sleepDuration time.Duration) ([]reflect.Value, error) {
	if sleepDuration <= 0 {
		sleepDuration = defaultSleep
	}
	if r.reader == nil {
		return nil, ErrBackendNotConfigured
	}
	// Watched before the first read, so that an end between the two is
	// not missed.
	notices, stop := r.reader.WatchGraph(ctx, r.WorkflowUUID)
	defer stop()
	ticker := time.NewTicker(sleepDuration)
	defer ticker.Stop()
	for {
		values, err := r.Touch(ctx)
		if err != nil || values != nil {
			return values, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ticker.C:
		case <-notices:
		}
	}
}
