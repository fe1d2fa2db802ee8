// Package common holds machinery's building blocks for brokers and
// backends of your own: Broker and Backend, which such an implementation
// embeds, and RedisConnector, a redigo pool as machinery's connector
// makes it. A broker built on Broker implements brokers/iface.Broker and
// is set with Server.SetBroker; it runs with machinery's semantics (see
// docs/migrating.md).
//
// Broker differs from machinery's in two ways: StopConsuming may be
// called more than once (machinery's panics), and RearmConsuming readies a
// stopped broker to consume again (machinery's never does), which
// machinist's Worker calls when it is launched.
package common

import (
	"errors"
	"slices"
	"sync"

	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/log"
	"github.com/b6192125/machinist/v1/retry"
	"github.com/b6192125/machinist/v1/tasks"
)

// ErrNotImplemented is the error of Broker's Publish, GetPendingTasks and
// GetDelayedTasks, which a broker that embeds Broker replaces.
var ErrNotImplemented = errors.New("Not implemented")

// Broker is the base of a broker: its config, the registered task names,
// the stop channel its consume loop watches and the reconnect backoff.
// Make it with NewBroker and embed it.
type Broker struct {
	cnf *config.Config

	mu            sync.Mutex
	names         []string
	retry         bool
	retryFunc     func(chan int)
	retryStopChan chan int
	stopChan      chan int
	stopped       bool // stopChan is closed
}

// NewBroker returns a Broker on cnf, ready to consume.
func NewBroker(cnf *config.Config) Broker {
	return Broker{
		cnf:           cnf,
		retry:         true,
		stopChan:      make(chan int),
		retryStopChan: make(chan int),
	}
}

// GetConfig returns the config the broker was made with.
func (b *Broker) GetConfig() *config.Config { return b.cnf }

// GetRetry reports whether a consume loop that failed should start again:
// true until StopConsuming.
func (b *Broker) GetRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.retry
}

// GetRetryFunc returns the reconnect backoff StartConsuming installed
// (retry.Closure()): each call sleeps for longer, or until a value arrives
// on the channel it is given (GetRetryStopChan).
func (b *Broker) GetRetryFunc() func(chan int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.retryFunc
}

// GetRetryStopChan returns the channel StopConsuming signals to cut a
// backoff short.
func (b *Broker) GetRetryStopChan() chan int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.retryStopChan
}

// GetStopChan returns the channel StopConsuming closes: a consume loop
// returns once it is closed.
func (b *Broker) GetStopChan() chan int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopChan
}

// Publish fails with ErrNotImplemented: a broker replaces it with its own
// Publish(ctx, signature).
func (b *Broker) Publish(signature *tasks.Signature) error { return ErrNotImplemented }

// SetRegisteredTaskNames records names, replacing those recorded before.
func (b *Broker) SetRegisteredTaskNames(names []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.names = names
}

// IsTaskRegistered reports whether name was recorded.
func (b *Broker) IsTaskRegistered(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.names, name)
}

// GetRegisteredTaskNames returns the names recorded, in the order given.
func (b *Broker) GetRegisteredTaskNames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.names
}

// GetPendingTasks fails with ErrNotImplemented.
func (b *Broker) GetPendingTasks(queue string) ([]*tasks.Signature, error) {
	return nil, ErrNotImplemented
}

// GetDelayedTasks fails with ErrNotImplemented.
func (b *Broker) GetDelayedTasks() ([]*tasks.Signature, error) {
	return nil, ErrNotImplemented
}

// StartConsuming is the common start of a broker's StartConsuming: it
// installs the reconnect backoff. After StopConsuming, the stop channel
// stays closed (a consume loop returns at once) until RearmConsuming.
func (b *Broker) StartConsuming(consumerTag string, concurrency int, taskProcessor iface.TaskProcessor) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retryFunc == nil {
		b.retryFunc = retry.Closure()
	}
}

// RearmConsuming readies a broker that StopConsuming stopped to consume
// again: a new stop channel, and retries on. It does nothing to a broker
// that was not stopped. machinist's Worker calls it when it is launched,
// before a StopConsuming meant for it can come.
func (b *Broker) RearmConsuming() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.stopChan == nil {
		b.stopChan, b.stopped, b.retry = make(chan int), false, true
	}
	if b.retryStopChan == nil {
		b.retryStopChan = make(chan int)
	}
}

// StopConsuming is the common part of a broker's StopConsuming: no retry
// from now on, a backoff under way is cut short, and the stop channel is
// closed. Safe to call more than once.
func (b *Broker) StopConsuming() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retry = false
	select {
	case b.retryStopChan <- 1:
		log.WARNING.Print("Stopping retry closure.")
	default:
	}
	if !b.stopped && b.stopChan != nil {
		close(b.stopChan)
		b.stopped = true
		log.WARNING.Print("Stop channel")
	}
}

// AdjustRoutingKey sets an empty RoutingKey to the config's DefaultQueue.
func (b *Broker) AdjustRoutingKey(s *tasks.Signature) {
	if s.RoutingKey != "" {
		return
	}
	s.RoutingKey = b.GetConfig().DefaultQueue
}
