package iface

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Runner is a TaskProcessor that runs its own fetch loop on the broker,
// under leases: machinist's Worker. Run returns nil once ctx ends and the
// tasks it was running have finished or been requeued.
type Runner interface {
	TaskProcessor
	Run(ctx context.Context) error
}

// Compat gives a LeaseBroker machinery's methods other than Publish,
// GetPendingTasks and GetDelayedTasks. Embed it; the zero value is ready,
// with no config.
type Compat struct {
	mu        sync.Mutex
	cnf       *config.Config
	names     map[string]struct{}
	consumers map[*consumer]struct{}
}

// consumer is one StartConsuming call: cancel stops it, done is closed
// when it has returned.
type consumer struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// SetConfig records cnf as the broker's config; the Server calls it for a
// broker made without one.
func (c *Compat) SetConfig(cnf *config.Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cnf = cnf
}

// GetConfig returns the broker's config, or nil if it has none.
func (c *Compat) GetConfig() *config.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cnf
}

// SetRegisteredTaskNames records names, replacing those recorded before.
func (c *Compat) SetRegisteredTaskNames(names []string) {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = set
}

// IsTaskRegistered reports whether name was recorded by
// SetRegisteredTaskNames.
func (c *Compat) IsTaskRegistered(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.names[name]
	return ok
}

// GetRegisteredTaskNames returns the recorded names, sorted.
func (c *Compat) GetRegisteredTaskNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.names))
}

// StartConsuming runs p, a Runner, until StopConsuming or until it stops by
// itself, and returns its error. consumerTag and concurrency are the
// worker's own (a Runner keeps its settings); they are accepted for
// machinery's signature.
func (c *Compat) StartConsuming(consumerTag string, concurrency int, p TaskProcessor) (bool, error) {
	return c.Consumer(p)()
}

// Consumer registers p, a Runner, as a consumer at once and returns the
// function that runs it as StartConsuming does: a StopConsuming from now on
// stops it, even one that comes before run is called (run then returns at
// once). LaunchAsync registers its worker this way before it starts the
// goroutine that runs it.
func (c *Compat) Consumer(p TaskProcessor) (run func() (retry bool, err error)) {
	r, ok := p.(Runner)
	if !ok {
		return func() (bool, error) {
			return false, fmt.Errorf("brokers: StartConsuming runs a worker that fetches under leases (a machinist Worker); %T is not one", p)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	me := &consumer{cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	if c.consumers == nil {
		c.consumers = make(map[*consumer]struct{})
	}
	c.consumers[me] = struct{}{}
	c.mu.Unlock()
	return func() (bool, error) {
		defer func() {
			c.mu.Lock()
			delete(c.consumers, me)
			c.mu.Unlock()
			cancel()
			close(me.done)
		}()
		return false, r.Run(ctx)
	}
}

// StopConsuming stops every worker running through StartConsuming and
// returns once they have stopped: their running tasks finished, or, past
// their shutdown timeout, requeued.
func (c *Compat) StopConsuming() {
	c.mu.Lock()
	running := make([]*consumer, 0, len(c.consumers))
	for r := range c.consumers {
		running = append(running, r)
	}
	c.mu.Unlock()
	for _, r := range running {
		r.cancel()
	}
	for _, r := range running {
		<-r.done
	}
}

// AdjustRoutingKey sets an empty RoutingKey to the config's DefaultQueue.
func (c *Compat) AdjustRoutingKey(s *tasks.Signature) {
	if s.RoutingKey != "" {
		return
	}
	if cnf := c.GetConfig(); cnf != nil {
		s.RoutingKey = cnf.DefaultQueue
	}
}
