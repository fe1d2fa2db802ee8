package machinery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/common"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// listBroker is a broker as a third party writes one for machinery: it
// embeds common.Broker and has machinery's Broker methods, nothing more.
// Messages travel as JSON, one list per queue; a task with an ETA waits
// in a delayed list until it is due.
type listBroker struct {
	common.Broker

	mu      sync.Mutex
	queues  map[string][][]byte
	delayed []*tasks.Signature
	wake    chan struct{} // a message arrived
	timers  []*time.Timer

	published, delayedSends atomic.Int64
}

func newListBroker(cnf *config.Config) *listBroker {
	return &listBroker{Broker: common.NewBroker(cnf), queues: map[string][][]byte{}, wake: make(chan struct{}, 1)}
}

func (b *listBroker) Publish(ctx context.Context, sig *tasks.Signature) error {
	b.AdjustRoutingKey(sig)
	b.published.Add(1)
	if sig.ETA != nil && time.Until(*sig.ETA) > 0 {
		b.delayedSends.Add(1)
		b.mu.Lock()
		b.delayed = append(b.delayed, sig)
		due := *sig.ETA
		b.timers = append(b.timers, time.AfterFunc(time.Until(due), func() { b.due(sig) }))
		b.mu.Unlock()
		return nil
	}
	return b.push(sig)
}

// due moves sig from the delayed list to its queue.
func (b *listBroker) due(sig *tasks.Signature) {
	b.mu.Lock()
	for i, d := range b.delayed {
		if d == sig {
			b.delayed = append(b.delayed[:i], b.delayed[i+1:]...)
			break
		}
	}
	b.mu.Unlock()
	_ = b.push(sig)
}

func (b *listBroker) push(sig *tasks.Signature) error {
	msg, err := json.Marshal(sig)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.queues[sig.RoutingKey] = append(b.queues[sig.RoutingKey], msg)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

func (b *listBroker) pop(queue string) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[queue]
	if len(q) == 0 {
		return nil
	}
	b.queues[queue] = q[1:]
	return q[0]
}

func (b *listBroker) StartConsuming(consumerTag string, concurrency int, p brokers.TaskProcessor) (bool, error) {
	b.Broker.StartConsuming(consumerTag, concurrency, p)
	queue := p.CustomQueue()
	if queue == "" {
		queue = b.GetConfig().DefaultQueue
	}
	stop := b.GetStopChan()
	slots := make(chan struct{}, concurrency)
	var running sync.WaitGroup
	defer running.Wait()
	for {
		msg := b.pop(queue)
		if msg == nil {
			select {
			case <-stop:
				return b.GetRetry(), nil
			case <-b.wake:
			}
			continue
		}
		var sig tasks.Signature
		if err := json.Unmarshal(msg, &sig); err != nil {
			return b.GetRetry(), err
		}
		slots <- struct{}{}
		running.Add(1)
		go func() {
			defer func() { <-slots; running.Done() }()
			if err := p.Process(&sig); err != nil {
				panic(fmt.Sprintf("process %s: %v", sig.UUID, err))
			}
		}()
	}
}

func (b *listBroker) StopConsuming() { b.Broker.StopConsuming() }

func (b *listBroker) GetPendingTasks(queue string) ([]*tasks.Signature, error) {
	if queue == "" {
		queue = b.GetConfig().DefaultQueue
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*tasks.Signature
	for _, msg := range b.queues[queue] {
		var sig tasks.Signature
		if err := json.Unmarshal(msg, &sig); err != nil {
			return nil, err
		}
		out = append(out, &sig)
	}
	return out, nil
}

func (b *listBroker) GetDelayedTasks() ([]*tasks.Signature, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*tasks.Signature(nil), b.delayed...), nil
}

// mapBackend is a result backend as a third party writes one for
// machinery: common.Backend and machinery's Backend methods on maps.
type mapBackend struct {
	common.Backend

	mu        sync.Mutex
	states    map[string]*tasks.TaskState
	groups    map[string][]string
	triggered map[string]bool
}

func newMapBackend(cnf *config.Config) *mapBackend {
	return &mapBackend{Backend: common.NewBackend(cnf), states: map[string]*tasks.TaskState{},
		groups: map[string][]string{}, triggered: map[string]bool{}}
}

func (b *mapBackend) InitGroup(groupUUID string, taskUUIDs []string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.groups[groupUUID] = taskUUIDs
	return nil
}

func (b *mapBackend) GroupCompleted(groupUUID string, groupTaskCount int) (bool, error) {
	states, err := b.GroupTaskStates(groupUUID, groupTaskCount)
	if err != nil {
		return false, err
	}
	done := 0
	for _, st := range states {
		if st.IsCompleted() {
			done++
		}
	}
	return done == groupTaskCount, nil
}

func (b *mapBackend) GroupTaskStates(groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids, ok := b.groups[groupUUID]
	if !ok {
		return nil, fmt.Errorf("group %s not found", groupUUID)
	}
	var out []*tasks.TaskState
	for _, id := range ids {
		st, ok := b.states[id]
		if !ok {
			return nil, fmt.Errorf("state of %s not found", id)
		}
		out = append(out, st)
	}
	return out, nil
}

func (b *mapBackend) TriggerChord(groupUUID string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.triggered[groupUUID] {
		return false, nil
	}
	b.triggered[groupUUID] = true
	return true, nil
}

func (b *mapBackend) set(st *tasks.TaskState) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.states[st.TaskUUID] = st
	return nil
}

func (b *mapBackend) SetStatePending(s *tasks.Signature) error {
	return b.set(tasks.NewPendingTaskState(s))
}
func (b *mapBackend) SetStateReceived(s *tasks.Signature) error {
	return b.set(tasks.NewReceivedTaskState(s))
}
func (b *mapBackend) SetStateStarted(s *tasks.Signature) error {
	return b.set(tasks.NewStartedTaskState(s))
}
func (b *mapBackend) SetStateRetry(s *tasks.Signature) error {
	return b.set(tasks.NewRetryTaskState(s))
}
func (b *mapBackend) SetStateSuccess(s *tasks.Signature, results []*tasks.TaskResult) error {
	return b.set(tasks.NewSuccessTaskState(s, results))
}
func (b *mapBackend) SetStateFailure(s *tasks.Signature, err string) error {
	return b.set(tasks.NewFailureTaskState(s, err))
}

func (b *mapBackend) GetState(taskUUID string) (*tasks.TaskState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.states[taskUUID]
	if !ok {
		return nil, errors.New("state not found")
	}
	copied := *st
	return &copied, nil
}

func (b *mapBackend) PurgeState(taskUUID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.states, taskUUID)
	return nil
}

func (b *mapBackend) PurgeGroupMeta(groupUUID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.groups, groupUUID)
	return nil
}

// Both satisfy machinery's interfaces and nothing more of machinist's.
var (
	_ brokers.Broker   = (*listBroker)(nil)
	_ backends.Backend = (*mapBackend)(nil)
)

func thirdPartyServer(t *testing.T) (*machinery.Server, *listBroker, *mapBackend) {
	t.Helper()
	cnf := &config.Config{DefaultQueue: "jobs", NoUnixSignals: true}
	broker, backend := newListBroker(cnf), newMapBackend(cnf)
	s := machinery.NewServerWithBrokerBackendLock(cnf, broker, backend, nil)
	t.Cleanup(func() { s.Close() })
	if s.GetBroker() != brokers.Broker(broker) || s.GetBackend() != backends.Backend(backend) {
		t.Fatalf("GetBroker, GetBackend = %T, %T; want those given", s.GetBroker(), s.GetBackend())
	}
	return s, broker, backend
}

// A broker and a backend written against machinery's interfaces alone
// (on common.Broker and common.Backend) run tasks, chains, chords and
// retries, with machinery's semantics: the broker hands each task to the
// worker's Process.
func TestThirdPartyBrokerAndBackend(t *testing.T) {
	t.Parallel()
	s, broker, backend := thirdPartyServer(t)
	var flaky atomic.Int64
	registerArithmetic(t, s, map[string]any{
		"flaky": func() (string, error) {
			if flaky.Add(1) == 1 {
				return "", tasks.NewErrRetryTaskLater("not yet", 10*time.Millisecond)
			}
			return "done", nil
		},
	})
	if !broker.IsTaskRegistered("add") {
		t.Fatal("the broker was not told the registered names")
	}
	w := s.NewWorker("third-party", 4)
	wait := launch(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	sendWorkflows(ctx, t, s)
	r, err := s.SendTaskWithContext(ctx, add(4, 5))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.GetWithContext(ctx, time.Millisecond); err != nil || got[0].Int() != 9 {
		t.Fatalf("add(4, 5): %v, %v; want 9", got, err)
	}
	if st, err := backend.GetState(r.Signature.UUID); err != nil || st.State != tasks.StateSuccess {
		t.Fatalf("the backend holds %+v, %v; want SUCCESS", st, err)
	}

	fr, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "flaky"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fr.GetWithContext(ctx, time.Millisecond); err != nil || got[0].String() != "done" {
		t.Fatalf("retried task: %v, %v; want done", got, err)
	}
	if n := broker.delayedSends.Load(); n != 1 {
		t.Errorf("the broker was sent %d tasks with an ETA; want the one retry", n)
	}

	w.Quit()
	if err := wait(); err != nil {
		t.Fatalf("worker stopped with %v", err)
	}
	select {
	case <-broker.GetStopChan():
	default:
		t.Fatal("Quit did not stop the broker's consuming")
	}

	// With no worker, a task waits in the broker, as the broker lists it.
	pending, err := s.SendTaskWithContext(ctx, add(5, 5))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := s.GetBroker().GetPendingTasks("")
	if err != nil || len(listed) != 1 || listed[0].UUID != pending.Signature.UUID {
		t.Fatalf("GetPendingTasks: %v, %v; want the task just sent", listed, err)
	}
	// A second worker consumes again.
	w2 := s.NewWorker("third-party-2", 1)
	wait2 := launch(t, w2)
	if got, err := pending.GetWithContext(ctx, time.Millisecond); err != nil || got[0].Int() != 10 {
		t.Fatalf("task after restart: %v, %v; want 10", got, err)
	}
	w2.Quit()
	if err := wait2(); err != nil {
		t.Fatalf("second worker stopped with %v", err)
	}
}

// What needs leases says so on a broker without them.
func TestThirdPartyBrokerRefusesLeasedFeatures(t *testing.T) {
	t.Parallel()
	s, _, _ := thirdPartyServer(t)
	err := s.CancelTask(context.Background(), "jobs", "task_x")
	if !errors.Is(err, brokers.ErrUnsupported) {
		t.Fatalf("CancelTask: %v; want ErrUnsupported", err)
	}
}

// Unique tasks and workflow graphs need machinist's store: on a broker
// written for machinery they are refused, not quietly run another way.
func TestThirdPartyBrokerRefusesStoreFeatures(t *testing.T) {
	t.Parallel()
	s, broker, _ := thirdPartyServer(t)
	ctx := context.Background()
	_, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "add", UniqueFor: time.Minute})
	if !errors.Is(err, brokers.ErrUnsupported) {
		t.Errorf("unique send: %v; want ErrUnsupported", err)
	}
	dag, err := tasks.NewDAG("d").Add("a", &tasks.Signature{Name: "add"}).Add("b", &tasks.Signature{Name: "add"}, "a").Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendWorkflowWithContext(ctx, dag); !errors.Is(err, brokers.ErrUnsupported) {
		t.Errorf("SendWorkflow: %v; want ErrUnsupported", err)
	}
	if n := broker.published.Load(); n != 0 {
		t.Errorf("%d tasks were published", n)
	}
}

// A StopConsuming right after LaunchAsync stops the worker, and so does
// Quit right after it has started; a stopped broker consumes again for
// the next worker.
func TestThirdPartyBrokerStops(t *testing.T) {
	t.Parallel()
	s, broker, _ := thirdPartyServer(t)
	registerArithmetic(t, s, nil)
	for i := 0; i < 20; i++ {
		w := s.NewWorker("stopped-by-broker", 1)
		wait := launch(t, w)
		broker.StopConsuming()
		if err := wait(); err != nil {
			t.Fatalf("worker stopped by StopConsuming: %v", err)
		}

		w = s.NewWorker("quit", 1)
		wait = launch(t, w)
		started(t, w)
		w.Quit()
		if err := wait(); err != nil {
			t.Fatalf("worker quit: %v", err)
		}
	}
	w := s.NewWorker("after", 1)
	wait := launch(t, w)
	defer func() { w.Quit(); _ = wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := s.SendTaskWithContext(ctx, add(2, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.GetWithContext(ctx, time.Millisecond); err != nil || got[0].Int() != 4 {
		t.Fatalf("task after the stops: %v, %v; want 4", got, err)
	}
}
