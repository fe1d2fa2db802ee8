package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

var _ iface.Backend = (*Backend)(nil)

// sweepEvery bounds how often a write scans every entry for expired ones.
const sweepEvery = time.Minute

// Backend is the in-process result backend. Create it with New; the zero
// value is not usable. Every method is safe for concurrent use.
type Backend struct {
	iface.Compat // machinery's methods
	expireIn     time.Duration

	mu        sync.Mutex
	closed    bool
	states    map[string]*stateEntry
	groups    map[string]*group
	workflows map[string]*workflowEntry
	lastSweep time.Time
	// watchers are the notice channels of the results waiting on each
	// task (WatchFinished).
	watchers map[string]map[chan struct{}]struct{}
}

// workflowEntry is a workflow's record and when it expires.
type workflowEntry struct {
	meta      *tasks.WorkflowMeta // the backend's own copy
	expiresAt time.Time
}

// stateEntry is a task's last state and when it expires.
type stateEntry struct {
	state     *tasks.TaskState // the backend's own copy
	expiresAt time.Time
}

// group is the bookkeeping of one group.
type group struct {
	members   []string                    // group order: InitGroup's, then members that finished unannounced
	listed    map[string]bool             // the members in members
	finished  map[string]*tasks.TaskState // final state of each finished member
	taskCount int                         // members the group waits for
	winner    string                      // the member TriggerChord elected
	expiresAt time.Time                   // zero while members are unfinished
}

// Options configures a Backend.
type Options struct {
	// ResultsExpireIn is how long a state is kept after its last write.
	// Zero means the default of Config.ResultsExpireIn (3600 s).
	ResultsExpireIn time.Duration
}

// OptionsFrom returns the options cnf sets (with its defaults applied).
func OptionsFrom(cnf *config.Config) Options {
	return Options{ResultsExpireIn: time.Duration(cnf.WithDefaults().ResultsExpireIn) * time.Second}
}

// New returns a backend that keeps states ResultsExpireIn after each write.
// It starts no goroutine.
func New(opts Options) *Backend {
	if opts.ResultsExpireIn <= 0 {
		opts = OptionsFrom(nil)
	}
	b := &Backend{
		expireIn:  opts.ResultsExpireIn,
		states:    make(map[string]*stateEntry),
		groups:    make(map[string]*group),
		workflows: make(map[string]*workflowEntry),
		lastSweep: time.Now(),
		watchers:  make(map[string]map[chan struct{}]struct{}),
	}
	b.Compat = iface.NewCompat(b)
	return b
}

// InitGroupContext records the group's members in group order. A group whose
// members started finishing before InitGroupContext keeps what they recorded.
func (b *Backend) InitGroupContext(ctx context.Context, groupUUID string, taskUUIDs []string) error {
	now, err := b.beginWrite("init group")
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	if groupUUID == "" {
		return fmt.Errorf("memory backend: init group: %w", tasks.ErrEmptyGroupUUID)
	}
	g := b.groupLocked(groupUUID, now)
	if g == nil {
		g = newGroup()
		b.groups[groupUUID] = g
	}
	members := make([]string, 0, len(taskUUIDs)+len(g.finished))
	listed := make(map[string]bool, len(taskUUIDs)+len(g.finished))
	for _, id := range taskUUIDs {
		if !listed[id] {
			listed[id] = true
			members = append(members, id)
		}
	}
	for _, id := range g.members { // finished before InitGroup, not in its list
		if g.finished[id] != nil && !listed[id] {
			listed[id] = true
			members = append(members, id)
		}
	}
	g.members, g.listed, g.taskCount = members, listed, len(taskUUIDs)
	b.touchLocked(g, now)
	return nil
}

// GroupCompletedContext reports whether groupTaskCount members of the group have
// finished. A group with no bookkeeping (none of its members finished and
// InitGroup was not called, or it expired or was purged) is not completed:
// false and no error.
func (b *Backend) GroupCompletedContext(ctx context.Context, groupUUID string, groupTaskCount int) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false, errClosed("group completed")
	}
	g := b.groupLocked(groupUUID, time.Now())
	if g == nil {
		return false, nil
	}
	return len(g.finished) >= groupTaskCount, nil
}

// GroupTaskStatesContext returns copies of the final states of the group's
// members in group order, and PENDING states (with only the UUID set) for
// members that have not finished. For a group created implicitly (its
// members finished without InitGroup) only the finished members are known,
// in the order they finished. A group with no bookkeeping is an error
// wrapping ErrGroupNotFound.
func (b *Backend) GroupTaskStatesContext(ctx context.Context, groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed("group task states")
	}
	g := b.groupLocked(groupUUID, time.Now())
	if g == nil {
		return nil, fmt.Errorf("memory backend: group %s: %w", groupUUID, iface.ErrGroupNotFound)
	}
	out := make([]*tasks.TaskState, len(g.members))
	for i, id := range g.members {
		if st := g.finished[id]; st != nil {
			out[i] = copyState(st)
		} else {
			out[i] = &tasks.TaskState{TaskUUID: id, State: tasks.StatePending}
		}
	}
	return out, nil
}

// TriggerChordContext returns true to the first member that asks and again to that
// member, false to every other. A group with no bookkeeping is an error
// wrapping ErrGroupNotFound: no member of a purged or expired group is
// elected.
func (b *Backend) TriggerChordContext(ctx context.Context, groupUUID, memberUUID string) (bool, error) {
	now, err := b.beginWrite("trigger chord")
	if err != nil {
		return false, err
	}
	defer b.mu.Unlock()
	if memberUUID == "" {
		return false, fmt.Errorf("memory backend: trigger chord of group %s: no member UUID", groupUUID)
	}
	g := b.groupLocked(groupUUID, now)
	if g == nil {
		return false, fmt.Errorf("memory backend: trigger chord: group %s: %w", groupUUID, iface.ErrGroupNotFound)
	}
	if g.winner == "" {
		g.winner = memberUUID
		b.touchLocked(g, now)
	}
	return g.winner == memberUUID, nil
}

// SetStatePendingContext writes the PENDING state of every signature.
func (b *Backend) SetStatePendingContext(ctx context.Context, sigs ...*tasks.Signature) error {
	for i, sig := range sigs {
		if err := checkSig(sig); err != nil {
			return fmt.Errorf("memory backend: set state pending: signature %d: %w", i, err)
		}
	}
	now, err := b.beginWrite("set state pending")
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	for _, sig := range sigs {
		b.putLocked(tasks.NewPendingTaskState(sig), now)
	}
	return nil
}

var _ iface.Workflows = (*Backend)(nil)

// InitWorkflowContext records wf, for ResultsExpireIn past its LastETA
// (its Lifetime), and writes the PENDING states of pending.
func (b *Backend) InitWorkflowContext(ctx context.Context, wf *tasks.WorkflowMeta, pending ...*tasks.Signature) error {
	if wf == nil || wf.WorkflowUUID == "" {
		return fmt.Errorf("memory backend: init workflow: no workflow UUID")
	}
	for i, sig := range pending {
		if err := checkSig(sig); err != nil {
			return fmt.Errorf("memory backend: init workflow %s: signature %d: %w", wf.WorkflowUUID, i, err)
		}
	}
	now, err := b.beginWrite("init workflow")
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	meta := *wf
	meta.Tasks = append([]tasks.WorkflowTask(nil), wf.Tasks...)
	b.workflows[wf.WorkflowUUID] = &workflowEntry{meta: &meta, expiresAt: now.Add(wf.Lifetime(b.expireIn))}
	for _, sig := range pending {
		b.putLocked(tasks.NewPendingTaskState(sig), now)
	}
	return nil
}

// GetWorkflowContext returns a copy of the record of the workflow id
// names (its own UUID, or one of its tasks').
func (b *Backend) GetWorkflowContext(ctx context.Context, id string) (*tasks.WorkflowMeta, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed("get workflow")
	}
	now := time.Now()
	e := b.workflows[id]
	if e == nil {
		if st := b.states[id]; st != nil && now.Before(st.expiresAt) && st.state.Workflow != "" {
			e = b.workflows[st.state.Workflow]
		}
	}
	if e == nil || !now.Before(e.expiresAt) {
		return nil, fmt.Errorf("memory backend: workflow of %s: %w", id, iface.ErrWorkflowNotFound)
	}
	meta := *e.meta
	meta.Tasks = append([]tasks.WorkflowTask(nil), e.meta.Tasks...)
	return &meta, nil
}

// SetStateAggregatedContext writes the state of each member of the
// aggregate aggregateUUID: PENDING, pointing at it.
func (b *Backend) SetStateAggregatedContext(ctx context.Context, aggregateUUID string, members ...*tasks.Signature) error {
	for i, sig := range members {
		if err := checkSig(sig); err != nil {
			return fmt.Errorf("memory backend: set state aggregated: signature %d: %w", i, err)
		}
	}
	now, err := b.beginWrite("set state aggregated")
	if err != nil {
		return err
	}
	defer b.mu.Unlock()
	for _, sig := range members {
		b.putLocked(tasks.NewAggregatedTaskState(sig, aggregateUUID), now)
	}
	return nil
}

// SetStateReceivedContext writes the RECEIVED state of sig.
func (b *Backend) SetStateReceivedContext(ctx context.Context, sig *tasks.Signature) error {
	return b.setState("set state received", sig, tasks.NewReceivedTaskState)
}

// SetStateStartedContext writes the STARTED state of sig.
func (b *Backend) SetStateStartedContext(ctx context.Context, sig *tasks.Signature) error {
	return b.setState("set state started", sig, tasks.NewStartedTaskState)
}

// SetStateRetryContext writes the RETRY state of sig.
func (b *Backend) SetStateRetryContext(ctx context.Context, sig *tasks.Signature) error {
	return b.setState("set state retry", sig, tasks.NewRetryTaskState)
}

// SetStateSuccessContext writes the SUCCESS state of sig with a copy of results and,
// when sig belongs to a group, records it in the group.
func (b *Backend) SetStateSuccessContext(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) error {
	return b.setState("set state success", sig, func(sig *tasks.Signature) *tasks.TaskState {
		return tasks.NewSuccessTaskState(sig, copyResults(results))
	})
}

// CompleteGroupMember writes state, the SUCCESS state of sig, a group
// member, and reports whether its group is complete after the write.
func (b *Backend) CompleteGroupMember(ctx context.Context, sig *tasks.Signature, state *tasks.TaskState) (bool, error) {
	if sig == nil || state == nil || state.State != tasks.StateSuccess || state.TaskUUID != sig.UUID {
		return false, fmt.Errorf("memory backend: CompleteGroupMember needs a signature and its SUCCESS state")
	}
	if err := b.setState("set state success", sig, func(*tasks.Signature) *tasks.TaskState { return state }); err != nil {
		return false, err
	}
	return b.GroupCompletedContext(ctx, sig.GroupUUID, sig.GroupTaskCount)
}

// SetStateFailureContext writes the FAILURE state of sig with errMsg and, when sig
// belongs to a group, records it in the group.
func (b *Backend) SetStateFailureContext(ctx context.Context, sig *tasks.Signature, errMsg string) error {
	return b.setState("set state failure", sig, func(sig *tasks.Signature) *tasks.TaskState {
		return tasks.NewFailureTaskState(sig, errMsg)
	})
}

// setState writes the state newState makes of sig, and records a final
// state of a group member in its group.
func (b *Backend) setState(op string, sig *tasks.Signature, newState func(*tasks.Signature) *tasks.TaskState) error {
	_, err := b.WriteState(sig, newState(sig))
	return err
}

// WriteState writes state, a state of sig, and records a final state of a
// group member in its group; it returns how many members of the group have
// finished (0 for a task that is no group member, or a state that is not
// final). It is how the broker paired with this backend (brokers/memory's
// NewPair) writes states under a task's lease.
func (b *Backend) WriteState(sig *tasks.Signature, state *tasks.TaskState) (int, error) {
	op := "set state " + strings.ToLower(state.State)
	if err := checkSig(sig); err != nil {
		return 0, fmt.Errorf("memory backend: %s: %w", op, err)
	}
	if state.State == tasks.StateSuccess {
		// Results must be storable as the Redis backend stores them, so
		// that a program tested here behaves the same there.
		if _, err := json.Marshal(state.Results); err != nil {
			return 0, fmt.Errorf("memory backend: %s of task %s: encode results: %w", op, sig.UUID, err)
		}
	}
	now, err := b.beginWrite(op)
	if err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	if state.State != tasks.StatePending && !state.IsCompleted() {
		// A state that is not final never hides a result: a late STARTED or
		// RETRY (from a worker paused past its lease) is dropped.
		if e := b.states[sig.UUID]; e != nil && now.Before(e.expiresAt) && e.state.IsCompleted() {
			return 0, nil
		}
	}
	b.putLocked(state, now)
	if sig.GroupUUID == "" || !state.IsCompleted() {
		return 0, nil
	}
	return len(b.recordLocked(sig, state, now).finished), nil
}

// GetStateContext returns a copy of the task's state, or an error wrapping
// ErrStateNotFound when there is none or it expired.
func (b *Backend) GetStateContext(ctx context.Context, taskUUID string) (*tasks.TaskState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed("get state")
	}
	e := b.states[taskUUID]
	if e != nil && !time.Now().Before(e.expiresAt) {
		delete(b.states, taskUUID)
		e = nil
	}
	if e == nil {
		return nil, fmt.Errorf("memory backend: task %s: %w", taskUUID, iface.ErrStateNotFound)
	}
	return copyState(e.state), nil
}

// PurgeStateContext deletes the task's state; a missing state is not an error.
func (b *Backend) PurgeStateContext(ctx context.Context, taskUUID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("purge state")
	}
	delete(b.states, taskUUID)
	return nil
}

var _ iface.Withdrawer = (*Backend)(nil)

// WithdrawPendingContext deletes the states of sigs that are still the
// PENDING states a send wrote (naming the signature's workflow).
func (b *Backend) WithdrawPendingContext(ctx context.Context, sigs ...*tasks.Signature) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("withdraw state pending")
	}
	b.withdrawLocked(sigs)
	return nil
}

// WithdrawWorkflowContext deletes the record of workflow id and the states
// of pending that are still the PENDING states InitWorkflowContext wrote.
func (b *Backend) WithdrawWorkflowContext(ctx context.Context, id string, pending ...*tasks.Signature) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("withdraw workflow")
	}
	delete(b.workflows, id)
	b.withdrawLocked(pending)
	return nil
}

// withdrawLocked deletes the states of sigs that are PENDING and name
// their signature's workflow.
func (b *Backend) withdrawLocked(sigs []*tasks.Signature) {
	for _, sig := range sigs {
		if sig == nil {
			continue
		}
		if e := b.states[sig.UUID]; e != nil && e.state.State == tasks.StatePending && e.state.Workflow == sig.WorkflowUUID {
			delete(b.states, sig.UUID)
		}
	}
}

// PurgeGroupMetaContext deletes the group's bookkeeping; a missing group is not an
// error.
func (b *Backend) PurgeGroupMetaContext(ctx context.Context, groupUUID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("purge group meta")
	}
	delete(b.groups, groupUUID)
	return nil
}

// Close drops everything the backend holds; later calls fail with
// ErrClosed. Safe to call more than once.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.states, b.groups, b.workflows, b.watchers = nil, nil, nil, nil
	return nil
}

func errClosed(op string) error {
	return fmt.Errorf("memory backend: %s: %w", op, iface.ErrClosed)
}

func checkSig(sig *tasks.Signature) error {
	if sig == nil {
		return tasks.ErrNilSignature
	}
	if sig.UUID == "" {
		return fmt.Errorf("signature %q has no UUID", sig.Name)
	}
	return nil
}

// beginWrite locks b for a write and, at most once a minute, deletes the
// expired entries. On success the caller holds b.mu and must unlock it.
func (b *Backend) beginWrite(op string) (time.Time, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return time.Time{}, errClosed(op)
	}
	now := time.Now()
	if now.Sub(b.lastSweep) >= sweepEvery {
		b.sweepLocked(now)
	}
	return now, nil
}

// sweepLocked deletes every state and group that expired by now.
func (b *Backend) sweepLocked(now time.Time) {
	b.lastSweep = now
	for id, e := range b.states {
		if !now.Before(e.expiresAt) {
			delete(b.states, id)
		}
	}
	for id, g := range b.groups {
		if g.expired(now) {
			delete(b.groups, id)
		}
	}
	for id, e := range b.workflows {
		if !now.Before(e.expiresAt) {
			delete(b.workflows, id)
		}
	}
}

// putLocked stores a copy of state until ResultsExpireIn from now, and
// tells the results waiting on the task when it is final (or names the
// aggregate the task joined). A state that
// names no workflow keeps the one the task's last state named (its
// PENDING state names it; signatures do not carry it to workers).
func (b *Backend) putLocked(state *tasks.TaskState, now time.Time) {
	c := copyState(state)
	if old := b.states[state.TaskUUID]; old != nil {
		if c.Workflow == "" {
			c.Workflow = old.state.Workflow
		}
		if c.State != tasks.StatePending {
			// When the task was sent: its PENDING write's.
			c.CreatedAt = old.state.CreatedAt
		}
	}
	b.states[state.TaskUUID] = &stateEntry{state: c, expiresAt: now.Add(b.expireIn)}
	if c.IsCompleted() || c.Aggregate != "" {
		for n := range b.watchers[c.TaskUUID] {
			select {
			case n <- struct{}{}:
			default: // a notice is already waiting
			}
		}
	}
}

var _ iface.Notifier = (*Backend)(nil)

// WatchFinished starts watching task taskUUID's state (see
// iface.Notifier): the channel receives when a final state is written.
func (b *Backend) WatchFinished(ctx context.Context, taskUUID string) (<-chan struct{}, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, func() {}
	}
	notice := make(chan struct{}, 1)
	if b.watchers[taskUUID] == nil {
		b.watchers[taskUUID] = make(map[chan struct{}]struct{})
	}
	b.watchers[taskUUID][notice] = struct{}{}
	return notice, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if w := b.watchers[taskUUID]; w != nil {
			delete(w, notice)
			if len(w) == 0 {
				delete(b.watchers, taskUUID)
			}
		}
	}
}

// groupLocked returns the group's live bookkeeping, deleting it when it has
// expired, or nil.
func (b *Backend) groupLocked(groupUUID string, now time.Time) *group {
	g := b.groups[groupUUID]
	if g != nil && g.expired(now) {
		delete(b.groups, groupUUID)
		return nil
	}
	return g
}

// recordLocked records the final state of the group member sig, creating
// the group (expecting sig.GroupTaskCount members) when InitGroup was not
// called.
func (b *Backend) recordLocked(sig *tasks.Signature, state *tasks.TaskState, now time.Time) *group {
	g := b.groupLocked(sig.GroupUUID, now)
	if g == nil {
		g = newGroup()
		g.taskCount = sig.GroupTaskCount
		b.groups[sig.GroupUUID] = g
	}
	if !g.listed[sig.UUID] {
		g.listed[sig.UUID] = true
		g.members = append(g.members, sig.UUID)
	}
	g.finished[sig.UUID] = copyState(state)
	b.touchLocked(g, now)
	return g
}

// touchLocked notes a write to g: a group whose members have all finished
// expires ResultsExpireIn after its last write, others never.
func (b *Backend) touchLocked(g *group, now time.Time) {
	if len(g.finished) >= g.taskCount {
		g.expiresAt = now.Add(b.expireIn)
	} else {
		g.expiresAt = time.Time{}
	}
}

func newGroup() *group {
	return &group{listed: make(map[string]bool), finished: make(map[string]*tasks.TaskState)}
}

func (g *group) expired(now time.Time) bool {
	return !g.expiresAt.IsZero() && !now.Before(g.expiresAt)
}

// copyState returns a copy of s that shares no results with it.
func copyState(s *tasks.TaskState) *tasks.TaskState {
	c := *s
	c.Results = copyResults(s.Results)
	return &c
}

// copyResults returns a deep copy of results; nil stays nil.
func copyResults(results []*tasks.TaskResult) []*tasks.TaskResult {
	if results == nil {
		return nil
	}
	out := make([]*tasks.TaskResult, len(results))
	for i, r := range results {
		if r != nil {
			out[i] = &tasks.TaskResult{Type: r.Type, Value: copyValue(r.Value)}
		}
	}
	return out
}

// copyValue copies slices and maps, recursively, so that the copy shares no
// mutable memory with v; other values are returned as they are.
func copyValue(v interface{}) interface{} {
	if v == nil {
		return nil
	}
	return deepCopy(reflect.ValueOf(v)).Interface()
}

func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(deepCopy(v.Elem()))
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		switch v.Type().Elem().Kind() {
		case reflect.Interface, reflect.Slice, reflect.Map:
		default: // elements hold no references to copy
			reflect.Copy(c, v)
			return c
		}
		for i := 0; i < v.Len(); i++ {
			c.Index(i).Set(deepCopy(v.Index(i)))
		}
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		iter := v.MapRange()
		for iter.Next() {
			c.SetMapIndex(iter.Key(), deepCopy(iter.Value()))
		}
		return c
	default:
		return v
	}
}
