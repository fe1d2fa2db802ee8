package service

import "errors"

// ErrStopped is returned by Start on a service that has been stopped: Stop
// is final, a stopped service does not start again.
var ErrStopped = errors.New("service: stopped")

// ErrInvalidParams is wrapped by the errors that name an invalid
// PeriodicParams field.
var ErrInvalidParams = errors.New("service: invalid periodic params")
