package common

import "github.com/b6192125/machinist/v1/config"

// Backend is the base of a backend: its config. Make it with NewBackend
// and embed it.
type Backend struct {
	cnf *config.Config
}

// NewBackend returns a Backend on cnf.
func NewBackend(cnf *config.Config) Backend {
	return Backend{cnf: cnf}
}

// GetConfig returns the config the backend was made with.
func (b *Backend) GetConfig() *config.Config { return b.cnf }

// IsAMQP reports false: results are not AMQP messages.
func (b *Backend) IsAMQP() bool { return false }
