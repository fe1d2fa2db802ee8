package machinery

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

	"github.com/b6192125/machinist/internal/pair"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// groupPublishBatch is how many group members one Publish call carries.
const groupPublishBatch = 1000

// SendTask sends a task; see SendTaskWithContext.
func (s *Server) SendTask(signature *tasks.Signature) (*result.AsyncResult, error) {
	return s.SendTaskWithContext(context.Background(), signature)
}

// SendTaskWithContext sends a task: it fills in the UUID ("task_…") and
// RoutingKey (the DefaultQueue) when they are empty, writes the PENDING state,
// calls the pre-publish handler, and publishes it. The signature is changed
// in place, as in machinery. In eager mode the task has run when
// this returns.
//
// It returns when ctx ends, whatever Redis does. Its error wraps ErrNotSent
// (nothing was sent) or ErrMaybeSent (the task may be queued: look its
// UUID up before sending it again), and ctx's error when ctx ended.
func (s *Server) SendTaskWithContext(ctx context.Context, signature *tasks.Signature) (*result.AsyncResult, error) {
	if s.invalid != nil {
		return nil, store.NotSent(s.invalid)
	}
	if err := signature.Validate(); err != nil {
		return nil, store.NotSent(fmt.Errorf("machinist: send task: %w", err))
	}
	if s.eager != nil && signature.AggregationKey != "" {
		return nil, store.NotSent(fmt.Errorf("machinist: send task %q with aggregation key %q: eager mode runs each task as it is sent: %w",
			signature.Name, signature.AggregationKey, brokers.ErrNoAggregator))
	}
	fresh := signature.UUID == ""
	s.prepare(signature)
	made := "" // the UUID this send made, if it did
	if fresh {
		made = signature.UUID
	}
	ctx, span := s.tracing.StartSend(ctx, signature.RoutingKey, []*tasks.Signature{signature})
	defer span.End()
	r, err := s.sendPrepared(ctx, signature, made)
	switch {
	case errors.Is(err, brokers.ErrDuplicateTask):
		// Already queued (a callback sent again after a recovery): the
		// message exists.
		telemetry.Event(ctx, "duplicate: a task with this UUID is already queued")
	case errors.Is(err, tasks.ErrTaskCancelled):
		telemetry.Event(ctx, "cancelled: the task's workflow was cancelled before it was sent")
	default:
		telemetry.Ended(span, err)
	}
	return r, err
}

// sendPrepared writes the PENDING state of signature, ready to travel, and
// publishes it; made is the UUID the send made for it, if it did.
func (s *Server) sendPrepared(ctx context.Context, signature *tasks.Signature, made string) (*result.AsyncResult, error) {
	backend := s.GetBackend()
	if s.eager != nil {
		if err := s.store().SetStatePendingContext(ctx, signature); err != nil {
			return nil, store.NotSent(fmt.Errorf("machinist: send task %s (%s): set state pending: %w", signature.UUID, signature.Name, err))
		}
		if err := s.publish(ctx, signature); err != nil {
			return nil, s.keptOut(ctx, signature, err)
		}
		return result.NewAsyncResult(signature, backend), nil
	}
	if err := s.send(ctx, made, signature); err != nil {
		return nil, s.keptOut(ctx, signature, fmt.Errorf("machinist: send task %s (%s): %w", signature.UUID, signature.Name, err))
	}
	return result.NewAsyncResult(signature, backend), nil
}

// keptOut returns err, the error of publishing signature, after writing
// the task's FAILURE state when err says its workflow was cancelled before
// it was sent (a *brokers/iface.CancelledError): the PENDING state just
// written, by this send or the paired broker's, may have replaced the one
// the cancellation wrote.
func (s *Server) keptOut(ctx context.Context, signature *tasks.Signature, err error) error {
	var ce *brokers.CancelledError
	if !errors.As(err, &ce) {
		return err
	}
	if ferr := s.store().SetStateFailureContext(ctx, signature, ce.Reason); ferr != nil {
		return errors.Join(err, fmt.Errorf("machinist: write state FAILURE of task %s, cancelled: %w", signature.UUID, ferr))
	}
	return err
}

func (s *Server) runPrePublish(sigs ...*tasks.Signature) {
	s.mu.RLock()
	pre := s.prePublish
	s.mu.RUnlock()
	if pre != nil {
		for _, sig := range sigs {
			pre(sig)
		}
	}
}

// prepare fills in what a signature needs to travel. Its callbacks get
// their UUIDs now, inside the message, so that a task that runs again after
// losing its worker sends the same callbacks, which are then recognised.
func (s *Server) prepare(sig *tasks.Signature) {
	if sig.UUID == "" {
		sig.UUID = "task_" + uuid.NewString()
	}
	if sig.RoutingKey == "" {
		sig.RoutingKey = s.GetConfig().DefaultQueue
	}
	if sig.Headers == nil {
		sig.Headers = tasks.Headers{}
	}
	s.metrics.Stamp(sig)
	nameCallbacks(sig, 0)
}

// nameCallbacks gives every callback nested in sig a UUID, down to a depth
// that only a cyclic signature reaches.
func nameCallbacks(sig *tasks.Signature, depth int) {
	if depth > 1000 {
		return
	}
	for _, cbs := range [][]*tasks.Signature{sig.OnSuccess, sig.OnError} {
		for _, cb := range cbs {
			if cb == nil {
				continue
			}
			if cb.UUID == "" {
				cb.UUID = "task_" + uuid.NewString()
			}
			nameCallbacks(cb, depth+1)
		}
	}
	if cb := sig.ChordCallback; cb != nil && cb.UUID == "" {
		cb.UUID = "chord_" + uuid.NewString()
	}
}

// publish runs the pre-publish handler and publishes sigs without their
// states, or, in eager mode, runs them.
func (s *Server) publish(ctx context.Context, sigs ...*tasks.Signature) error {
	s.runPrePublish(sigs...)
	publish := s.store().Publish
	if s.eager != nil {
		publish = func(ctx context.Context, sigs ...*tasks.Signature) error {
			return pair.SendFailed(s.runEagerly(ctx, sigs...))
		}
	}
	if err := publish(ctx, sigs...); err != nil {
		if len(sigs) == 1 {
			return fmt.Errorf("machinist: send task %s (%s): publish: %w", sigs[0].UUID, sigs[0].Name, err)
		}
		return fmt.Errorf("machinist: publish %d tasks: %w", len(sigs), err)
	}
	s.countSent(ctx, sigs)
	return nil
}

// send runs the pre-publish handler and publishes sigs with their PENDING
// states (store.Send). made is the UUID the send made for its one task, if
// it did: the store need not look for an earlier task or state with it
// (unless the pre-publish handler changed it).
func (s *Server) send(ctx context.Context, made string, sigs ...*tasks.Signature) error {
	s.runPrePublish(sigs...)
	fresh := made != "" && len(sigs) == 1 && sigs[0].UUID == made
	if err := s.store().Send(ctx, store.SendParams{Tasks: sigs, Fresh: fresh}); err != nil {
		return err
	}
	s.countSent(ctx, sigs)
	return nil
}

// countSent counts sigs, published.
func (s *Server) countSent(ctx context.Context, sigs []*tasks.Signature) {
	for _, sig := range sigs {
		s.metrics.Sent(ctx, sig.RoutingKey, sig.Name, 1)
	}
}

// sendCallback is how a worker sends callbacks and retries: like SendTask,
// but a task that is already queued counts as sent, because a task that ran
// again after losing its worker sends its callbacks again, and so does one
// whose workflow was cancelled (CancelWorkflow) before it was sent: its
// FAILURE state is written instead.
func (s *Server) sendCallback(ctx context.Context, sig *tasks.Signature) error {
	_, err := s.SendTaskWithContext(ctx, sig)
	if err != nil && !errors.Is(err, brokers.ErrDuplicateTask) && !errors.Is(err, tasks.ErrTaskCancelled) {
		return err
	}
	return nil
}

// prepareCallback readies a callback as sendCallback does before it
// publishes it, for a worker that publishes it in the same step as it
// settles the task that sends it.
func (s *Server) prepareCallback(sig *tasks.Signature) {
	s.prepare(sig)
	s.runPrePublish(sig)
}

// SendChain sends a chain; see SendChainWithContext.
func (s *Server) SendChain(chain *tasks.Chain) (*result.ChainAsyncResult, error) {
	return s.SendChainWithContext(context.Background(), chain)
}

// SendChainWithContext sends the first task of chain; each task sends the
// next when it succeeds. Every member's state is set to PENDING now, so that
// the chain's result can be waited for from the start, and the chain is
// recorded under a "chain_" WorkflowUUID, set on every task, for
// CancelWorkflow. It returns when ctx ends, and its error says what
// became of the chain as SendTaskWithContext's does; when it says
// ErrNotSent, the chain's record and PENDING states are deleted.
func (s *Server) SendChainWithContext(ctx context.Context, chain *tasks.Chain) (_ *result.ChainAsyncResult, err error) {
	if s.invalid != nil {
		return nil, store.NotSent(s.invalid)
	}
	if err := chain.Validate(); err != nil {
		return nil, store.NotSent(fmt.Errorf("machinist: send chain: %w", err))
	}
	for _, sig := range chain.Tasks {
		s.prepare(sig)
	}
	// The first task carries the chain's context; each sends the next
	// under its own.
	ctx, span := s.tracing.StartSend(ctx, chain.Tasks[0].RoutingKey, chain.Tasks[:1],
		telemetry.WorkflowKey.String("chain"), telemetry.ChainLengthKey.Int(len(chain.Tasks)))
	defer func() { telemetry.Ended(span, err); span.End() }()
	backend := s.GetBackend()
	// The states are written before the first task is sent, not after: a
	// task that ran meanwhile could have its next one's final state
	// replaced by PENDING. A send that then sends nothing takes them back.
	id := "chain_" + uuid.NewString()
	if err := s.initWorkflow(ctx, id, tasks.WorkflowChain, chain.Tasks, chain.Tasks); err != nil {
		s.store().WithdrawWorkflow(ctx, id, chain.Tasks...) // the writes may still land
		return nil, store.NotSent(fmt.Errorf("machinist: send chain: %w", err))
	}
	if err := s.publish(ctx, chain.Tasks[0]); err != nil {
		if pair.Withdrawable(err) {
			s.store().WithdrawWorkflow(ctx, id, chain.Tasks...)
		}
		return nil, err
	}
	return result.NewChainAsyncResult(chain.Tasks, backend), nil
}

// SendGroup sends a group; see SendGroupWithContext.
func (s *Server) SendGroup(group *tasks.Group, sendConcurrency int) ([]*result.AsyncResult, error) {
	return s.SendGroupWithContext(context.Background(), group, sendConcurrency)
}

// SendGroupWithContext sends every task of group to run in parallel. The
// group is recorded, all states are set to PENDING, and the tasks are
// published in batches, at most sendConcurrency batches at a time (0 means
// no limit). The group is recorded as a workflow under its GroupUUID, set
// on every task as WorkflowUUID, for CancelWorkflow. On error nothing is returned but the error, which
// says what became of the group as SendTaskWithContext's does: with
// ErrMaybeSent some tasks may have been published; with ErrNotSent none
// was, and the PENDING states the send wrote are deleted. It returns when
// ctx ends.
func (s *Server) SendGroupWithContext(ctx context.Context, group *tasks.Group, sendConcurrency int) ([]*result.AsyncResult, error) {
	if s.invalid != nil {
		return nil, store.NotSent(s.invalid)
	}
	if err := group.Validate(); err != nil {
		return nil, store.NotSent(fmt.Errorf("machinist: send group: %w", err))
	}
	return s.sendGroup(ctx, group, sendConcurrency, tasks.WorkflowGroup, nil, telemetry.WorkflowKey.String("group"))
}

// sendGroup sends group, validated, under one send span with attrs: its
// members share it. It records the workflow of kind (a group, or a chord
// whose callback is callback), writing the PENDING state of callback.
func (s *Server) sendGroup(ctx context.Context, group *tasks.Group, sendConcurrency int, kind string, callback *tasks.Signature, attrs ...attribute.KeyValue) (_ []*result.AsyncResult, err error) {
	for _, sig := range group.Tasks {
		s.prepare(sig)
		sig.GroupUUID = group.GroupUUID
		sig.GroupTaskCount = len(group.Tasks)
	}
	ctx, span := s.tracing.StartSend(ctx, commonQueue(group.Tasks), group.Tasks,
		append(attrs, telemetry.GroupIDKey.String(group.GroupUUID))...)
	defer func() { telemetry.Ended(span, err); span.End() }()
	backend := s.GetBackend()
	if err := s.store().InitGroupContext(ctx, group.GroupUUID, group.GetUUIDs()); err != nil {
		return nil, store.NotSent(fmt.Errorf("machinist: send group %s: init group: %w", group.GroupUUID, err))
	}
	// Recorded after the group's bookkeeping, which lists its members.
	var pending []*tasks.Signature
	if callback != nil {
		pending = append(pending, callback)
	}
	if err := s.initWorkflow(ctx, group.GroupUUID, kind, group.Tasks, pending); err != nil {
		s.store().WithdrawWorkflow(ctx, group.GroupUUID, pending...) // the writes may still land
		return nil, store.NotSent(fmt.Errorf("machinist: send %s %s: %w", kind, group.GroupUUID, err))
	}
	if err := s.publishMembers(ctx, group.Tasks, sendConcurrency); err != nil {
		if pair.Withdrawable(err) {
			s.store().WithdrawWorkflow(ctx, group.GroupUUID, pending...)
		}
		return nil, fmt.Errorf("machinist: send group %s: %w", group.GroupUUID, err)
	}
	results := make([]*result.AsyncResult, len(group.Tasks))
	for i, sig := range group.Tasks {
		results[i] = result.NewAsyncResult(sig, backend)
	}
	return results, nil
}

// commonQueue returns the queue of sigs, or "" when they go to several.
func commonQueue(sigs []*tasks.Signature) string {
	for _, sig := range sigs[1:] {
		if sig.RoutingKey != sigs[0].RoutingKey {
			return ""
		}
	}
	return sigs[0].RoutingKey
}

// publishMembers publishes members of a group with their PENDING states
// (store.Send), in batches of at most sendConcurrency at a time. Its error
// wraps ErrMaybeSent when some batch may have been published, else
// ErrNotSent (and the states it wrote are withdrawn).
func (s *Server) publishMembers(ctx context.Context, members []*tasks.Signature, sendConcurrency int) error {
	st := s.store()
	publish := func(ctx context.Context, sigs ...*tasks.Signature) error { return s.send(ctx, "", sigs...) }
	if s.eager != nil {
		if err := st.SetStatePendingContext(ctx, members...); err != nil {
			st.Withdraw(ctx, members...) // the writes may still land
			return store.NotSent(fmt.Errorf("set state pending: %w", err))
		}
		publish = s.publish
	}
	sent, err := publishBatches(ctx, members, sendConcurrency, publish)
	if err == nil {
		return nil
	}
	var ce *brokers.CancelledError
	if !errors.As(err, &ce) {
		// The members' states were written with their workflow's send:
		// they are taken back here, not by the batch that failed.
		if !sent && pair.Withdrawable(err) && !errors.Is(err, brokers.ErrMaybeSent) {
			st.Withdraw(ctx, members...)
		}
		return groupOutcome(ctx, err, sent)
	}
	// The group was cancelled while it was being sent (CancelWorkflow),
	// which keeps out, or deletes, every member: none runs. A member
	// whose state says PENDING (written before the cancellation's
	// FAILURE, or after it) says FAILURE again; one that finished keeps
	// its outcome.
	errs := []error{err}
	for _, sig := range members {
		if state, serr := st.GetStateContext(ctx, sig.UUID); serr == nil && state.State != tasks.StatePending {
			continue
		}
		errs = append(errs, st.SetStateFailureContext(ctx, sig, ce.Reason))
	}
	return groupOutcome(ctx, errors.Join(errs...), false)
}

// groupOutcome returns err, the error of the batches of a group's send,
// wrapping exactly one of ErrNotSent and ErrMaybeSent: ErrMaybeSent when
// a batch was published (sent) or may have been, even if the errors of
// the others say theirs were not (then it reads as err but no longer
// matches ErrNotSent, nor the errors behind it but ctx's).
func groupOutcome(ctx context.Context, err error, sent bool) error {
	maybe := sent || errors.Is(err, brokers.ErrMaybeSent)
	switch {
	case !maybe:
		if !errors.Is(err, brokers.ErrNotSent) {
			return store.NotSent(err)
		}
		return err
	case !errors.Is(err, brokers.ErrNotSent):
		return err
	}
	return &partlySent{err: err, ctxErr: ctx.Err()}
}

// partlySent is the error of a group's send some of whose batches may
// have been published while others surely were not. It reads as the
// batches' errors, and matches ErrMaybeSent and, when the send's context
// ended, the context's error.
type partlySent struct {
	err    error
	ctxErr error
}

func (e *partlySent) Error() string {
	return "some of its tasks may have been sent: " + e.err.Error()
}

func (e *partlySent) Unwrap() []error {
	if e.ctxErr != nil {
		return []error{brokers.ErrMaybeSent, e.ctxErr}
	}
	return []error{brokers.ErrMaybeSent}
}

// publishBatches publishes sigs with publish in batches, at most
// concurrency at a time, and reports whether a batch was published.
func publishBatches(ctx context.Context, sigs []*tasks.Signature, concurrency int, publish func(context.Context, ...*tasks.Signature) error) (bool, error) {
	var batches [][]*tasks.Signature
	for start := 0; start < len(sigs); start += groupPublishBatch {
		batches = append(batches, sigs[start:min(start+groupPublishBatch, len(sigs))])
	}
	if concurrency <= 0 || concurrency > len(batches) {
		concurrency = len(batches)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan []*tasks.Signature)
	errs := make(chan error, concurrency)
	var sent atomic.Bool
	for i := 0; i < concurrency; i++ {
		go func() {
			var err error
			for batch := range work {
				if err == nil {
					if err = publish(ctx, batch...); err != nil {
						cancel()
					} else {
						sent.Store(true)
					}
				}
			}
			errs <- err
		}()
	}
	for _, b := range batches {
		work <- b
	}
	close(work)
	var all []error
	for i := 0; i < concurrency; i++ {
		all = append(all, <-errs)
	}
	return sent.Load(), errors.Join(all...)
}

// SendChord sends a chord; see SendChordWithContext.
func (s *Server) SendChord(chord *tasks.Chord, sendConcurrency int) (*result.ChordAsyncResult, error) {
	return s.SendChordWithContext(context.Background(), chord, sendConcurrency)
}

// SendChordWithContext sends chord's group; the member that completes the
// group sends the callback, exactly once, with every member's results
// appended in group order (unless the callback is Immutable). If a member
// fails for good, the callback's state becomes FAILURE and its OnError
// signatures are sent with that member's error.
func (s *Server) SendChordWithContext(ctx context.Context, chord *tasks.Chord, sendConcurrency int) (*result.ChordAsyncResult, error) {
	if s.invalid != nil {
		return nil, store.NotSent(s.invalid)
	}
	if err := chord.Validate(); err != nil {
		return nil, store.NotSent(fmt.Errorf("machinist: send chord: %w", err))
	}
	cb := chord.Callback
	if cb.UUID == "" {
		cb.UUID = "chord_" + uuid.NewString()
	}
	s.prepare(cb)
	for _, sig := range chord.Group.Tasks {
		sig.ChordCallback = cb
	}
	if _, err := s.sendGroup(ctx, chord.Group, sendConcurrency, tasks.WorkflowChord, cb,
		telemetry.WorkflowKey.String("chord"), telemetry.ChordCallbackKey.String(cb.UUID)); err != nil {
		return nil, err
	}
	return result.NewChordAsyncResult(chord.Group.Tasks, cb, s.GetBackend()), nil
}

// initWorkflow records the workflow id of kind whose tasks are roots and
// those that follow them (marking each with WorkflowUUID id) and writes
// the PENDING states of pending, in one step where the store can; a
// backend that records no workflows only writes the states.
func (s *Server) initWorkflow(ctx context.Context, id, kind string, roots, pending []*tasks.Signature) error {
	if err := s.store().InitWorkflowContext(ctx, tasks.NewWorkflowMeta(id, kind, roots...), pending...); err != nil {
		return fmt.Errorf("record the workflow and set state pending: %w", err)
	}
	return nil
}
