package tasks

import "context"

type signatureCtxKey struct{}

// WithSignature returns a copy of ctx that carries sig, for
// SignatureFromContext. The worker calls it for every task it runs.
func WithSignature(ctx context.Context, sig *Signature) context.Context {
	return context.WithValue(ctx, signatureCtxKey{}, sig)
}

// SignatureFromContext returns the signature of the task whose context ctx
// is, or nil.
func SignatureFromContext(ctx context.Context) *Signature {
	sig, _ := ctx.Value(signatureCtxKey{}).(*Signature)
	return sig
}

// ParentState is a parent of a workflow node (a node it depends on) and
// its task's state.
type ParentState struct {
	// Key is the parent's key in the workflow (WorkflowNode.Key).
	Key string
	// State is its task's state: SUCCESS with its results, or FAILURE with
	// its error when it was allowed to fail (AllowFailure).
	State *TaskState
}

// ParentsFunc reads the parents of the workflow node whose task runs.
type ParentsFunc func(ctx context.Context) ([]ParentState, error)

type parentsCtxKey struct{}

// WithParents returns a copy of ctx that carries fn, for WorkflowParents.
// The worker calls it for every node of a workflow it runs.
func WithParents(ctx context.Context, fn ParentsFunc) context.Context {
	return context.WithValue(ctx, parentsCtxKey{}, fn)
}

// WorkflowParents returns the parents of the workflow node whose task's
// context ctx is, in the order of its deps (WorkflowNode.Deps), each with
// its task's state: how a node that follows one allowed to fail
// (AllowFailure) learns that it failed, and why. The node's signature
// names its parents (Signature.WorkflowParents); it reads one state per
// parent, a round trip to the backend each. A task that is not a node of
// a workflow sent with
// SendWorkflowWithContext: nil, ErrNotWorkflowNode.
func WorkflowParents(ctx context.Context) ([]ParentState, error) {
	fn, _ := ctx.Value(parentsCtxKey{}).(ParentsFunc)
	if fn == nil {
		return nil, ErrNotWorkflowNode
	}
	return fn(ctx)
}
