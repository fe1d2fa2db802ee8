// Package eager is machinery's eager broker: a Server made with one
// (NewServerWithBrokerBackend, NewServerWithBrokerBackendLock) runs in
// eager mode, as a Server whose Config.Broker is "eager" does: each task it
// sends runs in the sending goroutine, through a worker of the Server, and
// its state is final when the send returns (a task with an ETA, or a
// retry, makes the send wait until then). Unit tests of programs written
// for machinery build their Servers this way.
//
// machinery's Mode interface (AssignWorker) is not here: its argument is
// machinery's worker, which the Server's own worker replaces.
package eager

import (
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/brokers/memory"
)

// Broker is an in-process broker that puts the Server given it in eager
// mode. Nothing is queued on it in that mode; its other methods are those
// of the memory broker it wraps.
type Broker struct {
	*memory.Broker
}

// New returns an eager broker. It panics if the in-process engine cannot
// listen on a loopback port.
func New() brokers.Broker {
	return &Broker{Broker: memory.New(memory.Options{})}
}

// Eager reports that a Server given b runs the tasks it sends at once.
func (b *Broker) Eager() bool { return true }
