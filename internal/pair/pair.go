// Package pair joins a broker and a result backend into the store the
// Server, the Worker and the results run on (internal/store.Store).
//
// It is the one place that looks at what its parts can do. A broker that
// writes the backend's states itself (store.Joiner: machinist's broker and
// backend on one Redis server or on the embedded engine) publishes a task
// with its PENDING state, and settles a task with its state and the tasks
// that follow it, in one step. Any other pair (a Redis Cluster, where a
// task and its state live in different slots, or a machinery-style broker
// and backend of your own) does the same step by step, in the order that
// keeps a worker that lost its lease from writing anything. An operation
// neither part offers fails with store.ErrUnsupported.
package pair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Store is a broker and a backend as one store.Store.
type Store struct {
	store.Backend // the states half, as it is
	broker        store.Broker
	log           *slog.Logger

	joined     store.StateBroker // nil: step by step
	relay      store.Relay
	claimer    store.Claimer
	pauser     store.Pauser
	inspector  store.Inspector
	canceller  store.Canceller
	aggregator store.Aggregator
	monitor    store.Monitor
	graphs     store.Graphs
	workflows  store.Workflows
	withdrawer store.Withdrawer
	states     store.StateReader // the backend as results read it (Reader)

	// step, if set, is called after each step of a success settled step
	// by step (SetSettleSteps).
	step func(step string)
}

// SetSettleSteps has step called after each step of a success that s
// settles step by step, with the step's name: "committed" (the outcome
// committed and the state written), "released" (a graph's node's success
// recorded in its graph), "sent <uuid>" (a task that follows sent). For
// fault-injection tests: a test kills or pauses the process at a step.
// Call it before s is used.
func (s *Store) SetSettleSteps(step func(step string)) { s.step = step }

// stepped calls the settle step hook, if set.
func (s *Store) stepped(step string) {
	if s.step != nil {
		s.step(step)
	}
}

var _ store.Store = (*Store)(nil)

// New returns broker and backend as one store. Each is machinist's
// (store.Broker, store.Backend) or written for machinery only, and then
// called as machinery calls it. log receives what it logs (a withdrawal of
// PENDING states that failed); nil: slog.Default().
func New(mb store.MachineryBroker, mbe store.MachineryBackend, log *slog.Logger) *Store {
	if log == nil {
		log = slog.Default()
	}
	broker, backend := leaseBroker(mb), ContextBackend(mbe)
	s := &Store{Backend: backend, broker: broker, log: log}
	if j, ok := broker.(store.Joiner); ok {
		s.joined = j.Join(backend)
	}
	s.relay, _ = broker.(store.Relay)
	s.claimer, _ = broker.(store.Claimer)
	s.pauser, _ = broker.(store.Pauser)
	s.inspector, _ = broker.(store.Inspector)
	s.canceller, _ = broker.(store.Canceller)
	s.aggregator, _ = broker.(store.Aggregator)
	s.monitor, _ = broker.(store.Monitor)
	s.graphs, _ = broker.(store.Graphs)
	s.workflows, _ = backend.(store.Workflows)
	s.withdrawer, _ = backend.(store.Withdrawer)
	s.states = Reader(mbe)
	return s
}

// Broker returns the tasks half.
func (s *Store) Broker() store.Broker { return s.broker }

// Inspects reports whether the broker lists what it holds
// (store.Inspector).
func (s *Store) Inspects() bool { return s.inspector != nil }

// Cancels reports whether the broker cancels tasks (store.Canceller).
func (s *Store) Cancels() bool { return s.canceller != nil }

// Aggregates reports whether the broker aggregates (store.Aggregator).
func (s *Store) Aggregates() bool { return s.aggregator != nil }

// OneStep reports whether the broker writes the backend's states itself.
func (s *Store) OneStep() bool { return s.joined != nil }

// unsupported is the error of an operation the part it names lacks.
func unsupported(what string, part any) error {
	return fmt.Errorf("%T cannot %s: %w", part, what, store.ErrUnsupported)
}

// Send publishes p.Tasks with their PENDING states (see store.Store).
func (s *Store) Send(ctx context.Context, p store.SendParams) error {
	if s.joined != nil {
		if err := s.joined.PublishPending(ctx, p); err != nil {
			return fmt.Errorf("publish: %w", SendFailed(err))
		}
		return nil
	}
	// A task of a workflow (a chain's next step, a chord's callback) had
	// its PENDING state written when its workflow was sent, and a send of
	// it that fails is tried again: its state is not this send's to take
	// back.
	var own []*tasks.Signature
	for _, sig := range p.Tasks {
		if sig.WorkflowUUID == "" {
			own = append(own, sig)
		}
	}
	if err := s.Backend.SetStatePendingContext(ctx, p.Tasks...); err != nil {
		s.Withdraw(ctx, own...) // the writes may still land
		return store.NotSent(fmt.Errorf("set state pending: %w", err))
	}
	if err := s.broker.PublishTasks(ctx, p.Tasks...); err != nil {
		err = SendFailed(err)
		if Withdrawable(err) {
			s.Withdraw(ctx, own...)
		}
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// SendsEach reports whether SendEach sends: the broker and backend are
// one store with a batch send.
func (s *Store) SendsEach() bool {
	_, ok := s.joined.(store.EachSender)
	return ok
}

// SendEach publishes each of sigs with its PENDING state, as Send would
// publish it alone, in few calls, and returns each one's error; nil when
// the broker cannot (store.EachSender): the caller sends them one by one.
func (s *Store) SendEach(ctx context.Context, sigs []*tasks.Signature) []error {
	es, ok := s.joined.(store.EachSender)
	if !ok {
		return nil
	}
	errs := es.PublishPendingEach(ctx, sigs)
	for i, err := range errs {
		if err != nil {
			errs[i] = fmt.Errorf("publish: %w", SendFailed(err))
		}
	}
	return errs
}

// Publish publishes sigs without their states.
func (s *Store) Publish(ctx context.Context, sigs ...*tasks.Signature) error {
	return SendFailed(s.broker.PublishTasks(ctx, sigs...))
}

// SendFailed returns err, the error of a publish, as it is when it says
// whether the tasks may have been sent (ErrNotSent, ErrMaybeSent), else
// wrapping ErrMaybeSent: a broker that does not say may have sent them.
func SendFailed(err error) error {
	if err == nil || errors.Is(err, store.ErrNotSent) || errors.Is(err, store.ErrMaybeSent) {
		return err
	}
	return store.MaybeSent(err)
}

// Withdrawable reports whether err, a send's error, lets the PENDING
// states the send wrote be taken back: it sent nothing, and not because a
// task with its UUID is queued (ErrDuplicateTask: the states are that
// task's) or its workflow was cancelled (whose FAILURE states stand).
func Withdrawable(err error) bool {
	return errors.Is(err, store.ErrNotSent) && !errors.Is(err, store.ErrDuplicateTask) &&
		!errors.Is(err, tasks.ErrTaskCancelled)
}

// Withdraw takes back the PENDING states of sigs, written by a send that
// then published none of them, after those writes (which may have been
// still under way when the send gave up), even once ctx has ended. It
// does not wait for the deletion where the backend queues it; a failure
// is logged.
func (s *Store) Withdraw(ctx context.Context, sigs ...*tasks.Signature) {
	if len(sigs) > 0 {
		s.logWithdrawal(s.WithdrawPendingContext(context.WithoutCancel(ctx), sigs...))
	}
}

// WithdrawWorkflow takes back the record of workflow id and the PENDING
// states of pending, written with it, as Withdraw does.
func (s *Store) WithdrawWorkflow(ctx context.Context, id string, pending ...*tasks.Signature) {
	s.logWithdrawal(s.WithdrawWorkflowContext(context.WithoutCancel(ctx), id, pending...))
}

func (s *Store) logWithdrawal(err error) {
	if err != nil && !errors.Is(err, store.ErrBackendClosed) {
		s.log.Warn("deleting the PENDING states of a send that failed failed; they expire after ResultsExpireIn", slog.Any("error", err))
	}
}

// WithdrawPendingContext takes back PENDING states, through a backend that
// can; through another it does nothing (the states expire).
func (s *Store) WithdrawPendingContext(ctx context.Context, sigs ...*tasks.Signature) error {
	if s.withdrawer == nil {
		return nil
	}
	return s.withdrawer.WithdrawPendingContext(ctx, sigs...)
}

// WithdrawWorkflowContext takes back a workflow's record and PENDING
// states, as far as the backend keeps them.
func (s *Store) WithdrawWorkflowContext(ctx context.Context, id string, pending ...*tasks.Signature) error {
	switch {
	case s.withdrawer == nil:
		return nil
	case s.workflows == nil:
		if len(pending) == 0 {
			return nil
		}
		return s.withdrawer.WithdrawPendingContext(ctx, pending...)
	}
	return s.withdrawer.WithdrawWorkflowContext(ctx, id, pending...)
}

// InitWorkflowContext records wf and writes the PENDING states of pending
// in one step, through a backend that records workflows; through another
// it only writes the states.
func (s *Store) InitWorkflowContext(ctx context.Context, wf *tasks.WorkflowMeta, pending ...*tasks.Signature) error {
	if s.workflows == nil {
		if len(pending) == 0 {
			return nil
		}
		return s.Backend.SetStatePendingContext(ctx, pending...)
	}
	return s.workflows.InitWorkflowContext(ctx, wf, pending...)
}

// GetWorkflowContext returns the record of a workflow.
func (s *Store) GetWorkflowContext(ctx context.Context, id string) (*tasks.WorkflowMeta, error) {
	if s.workflows == nil {
		return nil, unsupported("record workflows", s.Backend)
	}
	return s.workflows.GetWorkflowContext(ctx, id)
}

// WriteState writes a state of a task, under its delivery's lease (see
// store.Store). Step by step, a final state follows its commit, which the
// broker refuses to a stale holder; a state that is not final follows a
// check of the lease by the clock (and the backend never lets such a state
// hide a final one).
func (s *Store) WriteState(ctx context.Context, p store.WriteParams) (bool, error) {
	d := p.Delivery
	switch {
	case d == nil:
	case s.joined != nil:
		return s.joined.WriteState(ctx, d, p.State, p.Commit)
	case p.Commit:
		if err := s.broker.Commit(ctx, d, p.State); err != nil {
			return false, err
		}
	case !d.Lease.Valid():
		return false, fmt.Errorf("write state %s of task %s: %w", p.State.State, p.Signature.UUID, store.ErrLeaseLost)
	}
	sig, state := p.Signature, p.State
	// A state with fields beyond machinery's is written whole where the
	// backend can (a group member's goes through CompleteGroupMember).
	ss, whole := s.Backend.(store.StateSetter)
	whole = whole && (state.Trace != "" || state.Progress != nil) && (sig.GroupUUID == "" || sig.ChordCallback == nil)
	switch state.State {
	case tasks.StateSuccess:
		if sig.GroupUUID != "" && sig.ChordCallback != nil {
			return s.Backend.CompleteGroupMember(ctx, sig, state)
		}
		if whole {
			return false, ss.SetStateContext(ctx, sig, state)
		}
		return false, s.Backend.SetStateSuccessContext(ctx, sig, state.Results)
	case tasks.StateFailure:
		if whole {
			return false, ss.SetStateContext(ctx, sig, state)
		}
		return false, s.Backend.SetStateFailureContext(ctx, sig, state.Error)
	case tasks.StateStarted:
		return false, s.Backend.SetStateStartedContext(ctx, sig)
	case tasks.StateRetry:
		return false, s.Backend.SetStateRetryContext(ctx, sig)
	}
	return false, fmt.Errorf("write state %s of task %s: not a state a worker writes", state.State, sig.UUID)
}

// Settle ends the run of d (see store.Store).
func (s *Store) Settle(ctx context.Context, d *store.Delivery, st store.Settlement) (*store.Delivery, error) {
	switch st.Kind {
	case store.SettleAck:
		return s.ack(ctx, d, st.Take)
	case store.SettleSuccess:
		if s.joined != nil {
			return s.joined.AckSuccess(ctx, d, st.State, st.Next, st.Take)
		}
		return s.succeed(ctx, d, st)
	case store.SettleRetry:
		if st.State != nil {
			if _, err := s.WriteState(ctx, store.WriteParams{Delivery: d, Signature: d.Signature, State: st.State}); err != nil {
				return nil, fmt.Errorf("write state %s: %w", st.State.State, err)
			}
		}
		return nil, s.broker.Retry(ctx, d, st.RetryAt, st.Reason)
	case store.SettleArchive:
		return nil, s.broker.Archive(ctx, d, st.Reason)
	}
	return nil, fmt.Errorf("settle task %s: unknown settlement %d", d.Signature.UUID, st.Kind)
}

// ack acknowledges d, taking the next task for the caller where the broker
// can (a Relay).
func (s *Store) ack(ctx context.Context, d *store.Delivery, take *store.Take) (*store.Delivery, error) {
	if take != nil && s.relay != nil {
		return s.relay.AckTake(ctx, d, *take)
	}
	return nil, s.broker.Ack(ctx, d)
}

// succeed is SettleSuccess step by step: the success committed and
// written, then each task that follows published (a graph's node's
// released first), then the
// acknowledgement. A step that fails leaves the task unacknowledged; when
// its lease ends, the worker that takes it finds the committed outcome and
// does what was not done.
func (s *Store) succeed(ctx context.Context, d *store.Delivery, st store.Settlement) (*store.Delivery, error) {
	sig := d.Signature
	groupDone, err := s.WriteState(ctx, store.WriteParams{Delivery: d, Signature: sig, State: st.State, Commit: true})
	if err != nil {
		return nil, err
	}
	s.stepped("committed")
	next := st.Next
	if sig.WorkflowNode != "" {
		released, err := s.NodeSucceeded(ctx, sig, st.State.Results)
		switch {
		case errors.Is(err, store.ErrWorkflowNotFound):
			s.log.Warn("the workflow's graph is gone (it outlived its TTL): no node follows this one",
				slog.String("workflow", sig.WorkflowUUID), slog.String("node", sig.WorkflowNode))
		case err != nil:
			return nil, err
		}
		s.stepped("released")
		next = append(slices.Clip(next), released...)
	}
	for _, n := range next {
		if err := s.sendNext(ctx, d, n); err != nil {
			return nil, err
		}
		s.stepped("sent " + n.UUID)
	}
	if sig.GroupUUID != "" && sig.ChordCallback != nil && groupDone {
		return nil, store.ErrChordDue
	}
	return s.ack(ctx, d, st.Take)
}

// sendNext publishes next, a task that follows d's, PENDING. One still
// queued counts as sent, as does one whose workflow was cancelled (its
// FAILURE is written instead); after a recovery, so does one whose state
// shows it started or finished: the earlier run sent it.
func (s *Store) sendNext(ctx context.Context, d *store.Delivery, next *tasks.Signature) error {
	if sent, err := s.SentBefore(ctx, d, next); sent || err != nil {
		return err
	}
	err := s.Send(ctx, store.SendParams{Tasks: []*tasks.Signature{next}})
	var ce *store.CancelledError
	switch {
	case err == nil, errors.Is(err, store.ErrDuplicateTask):
		return nil
	case errors.As(err, &ce):
		return s.Backend.SetStateFailureContext(ctx, next, ce.Reason)
	}
	return fmt.Errorf("send task %s: %w", next.UUID, err)
}

// SentBefore reports whether next, a task that follows d's (a callback),
// was sent by an earlier run of d's task: only a task that ran again after
// a recovery may have sent it, and its callbacks may have run and been
// forgotten by the broker since, so their states are what tell. One that
// has started or finished was; one PENDING or without a state may not
// have been.
func (s *Store) SentBefore(ctx context.Context, d *store.Delivery, next *tasks.Signature) (bool, error) {
	if d == nil || d.Recovered == 0 || next.UUID == "" {
		return false, nil
	}
	st, err := s.Backend.GetStateContext(ctx, next.UUID)
	switch {
	case err == nil:
		return st.State != tasks.StatePending, nil
	case errors.Is(err, store.ErrStateNotFound):
		return false, nil
	}
	return false, fmt.Errorf("read state of task %s: %w", next.UUID, err)
}

func (s *Store) Fetch(ctx context.Context, queues []string, max int, names *store.TaskNames) ([]*store.Delivery, error) {
	return s.broker.Fetch(ctx, queues, max, names)
}

func (s *Store) Announce(ctx context.Context, queues []string, names *store.TaskNames, ttl time.Duration) error {
	return s.broker.Announce(ctx, queues, names, ttl)
}

func (s *Store) Reroute(ctx context.Context, d *store.Delivery) (bool, error) {
	return s.broker.Reroute(ctx, d)
}

func (s *Store) ExtendLeases(ctx context.Context, ds ...*store.Delivery) error {
	return s.broker.ExtendLeases(ctx, ds...)
}

func (s *Store) Requeue(ctx context.Context, ds ...*store.Delivery) error {
	return s.broker.Requeue(ctx, ds...)
}

// Close closes the broker, then the backend.
func (s *Store) Close() error {
	return errors.Join(s.broker.Close(), s.Backend.Close())
}
