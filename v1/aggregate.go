package machinery

import (
	"fmt"
	"maps"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/worker"
)

// AggregationPolicy says when a group of members is released as one batch:
// once it holds MaxSize members, or its oldest member waited MaxDelay, or
// no member joined for GracePeriod; a zero limit does not apply.
type AggregationPolicy = brokers.AggregationPolicy

// AggregatorFunc builds the task that runs in place of a batch of members
// (tasks sent with the same Name and AggregationKey to one queue): key is
// their AggregationKey, members their signatures, oldest first, with
// their Args as a worker receives them (from Redis, as JSON decodes them:
// numbers are json.Number; tasks.ReflectValue converts a value to its
// Arg's Type). The task
// it returns runs as any task (retries, leases, archive); its UUID is
// derived from the batch (a UUID it sets is replaced: a batch built again
// after its worker died must make the same task), and its RoutingKey
// defaults to the members' queue. An error (or a panic) has the batch tried again after
// 1, 2, 3 … seconds, AggregatorRetries times, and then its members
// archived with it.
type AggregatorFunc = worker.AggregatorFunc

// RegisterAggregator registers fn as the aggregator of the members of task
// name: signatures sent with that Name and an AggregationKey. The Server's
// workers announce it to the broker and build the batches of their queues'
// groups; a member sent while no worker alive aggregates its name on its
// queue is refused with an error wrapping brokers/iface.ErrNoAggregator.
// The zero policy means the config's AggregationMaxSize,
// AggregationMaxDelay and AggregationGracePeriod. The aggregate fn returns
// is a task like any other: its name must be registered on some worker.
// Each member's AsyncResult resolves with its aggregate's outcome.
func (s *Server) RegisterAggregator(name string, policy AggregationPolicy, fn AggregatorFunc) error {
	if name == "" {
		return fmt.Errorf("machinist: register aggregator: no task name")
	}
	if fn == nil {
		return fmt.Errorf("machinist: register aggregator of %q: nil function", name)
	}
	if policy == (AggregationPolicy{}) {
		c := s.GetConfig()
		policy = AggregationPolicy{MaxSize: c.AggregationMaxSize, MaxDelay: c.AggregationMaxDelay, GracePeriod: c.AggregationGracePeriod}
	}
	if err := policy.Validate(); err != nil {
		return fmt.Errorf("machinist: register aggregator of %q: %w", name, err)
	}
	if !s.store().Aggregates() && s.eager == nil {
		return fmt.Errorf("machinist: register aggregator of %q: broker %T does not aggregate", name, s.GetBroker())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aggregators == nil {
		s.aggregators = make(map[string]worker.Aggregation)
	}
	s.aggregators[name] = worker.Aggregation{Policy: policy, Func: fn}
	return nil
}

// GetAggregators returns the registered aggregators by task name
// (worker.AggregatorRegistry).
func (s *Server) GetAggregators() map[string]worker.Aggregation {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.aggregators)
}
