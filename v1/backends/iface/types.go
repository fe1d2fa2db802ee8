package iface

import "github.com/b6192125/machinist/internal/store"

// What a backend may offer besides Backend, declared with the store's
// vocabulary in one internal package; both of machinist's backends offer
// all of them.
type (
	Workflows        = store.Workflows
	Withdrawer       = store.Withdrawer
	QueueStateReader = store.QueueStateReader
	Notifier         = store.Notifier
	StateSetter      = store.StateSetter
	Events           = store.Events
)

// Errors of result backends, the same values as the store's:
// implementations wrap them with %w, so callers branch with errors.Is.
var (
	ErrStateNotFound    = store.ErrStateNotFound
	ErrGroupNotFound    = store.ErrGroupNotFound
	ErrWorkflowNotFound = store.ErrWorkflowNotFound
	ErrClosed           = store.ErrBackendClosed
	ErrAuth             = store.ErrAuth
)
