// Package eager is machinery's eager result backend: states kept in the
// process, for a Server in eager mode (brokers/eager) or any Server whose
// states no other process reads. It is the memory backend
// (backends/memory), which keeps states as the Redis backend does.
package eager

import (
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/memory"
)

// New returns a backend that keeps states in the process. It panics if
// the in-process engine cannot listen on a loopback port.
func New() backends.Backend {
	return memory.New(memory.Options{})
}
