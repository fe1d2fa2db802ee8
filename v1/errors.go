package machinery

import "errors"

// Errors of the Server and Worker. Those machinery has keep machinery's text.
var (
	// ErrWorkerQuitGracefully is what Launch returns after the first SIGINT
	// or SIGTERM, once running tasks have finished or been requeued.
	ErrWorkerQuitGracefully = errors.New("Worker quit gracefully")
	// ErrWorkerQuitAbruptly is what Launch returns after a second signal:
	// running tasks were cancelled and requeued at once.
	ErrWorkerQuitAbruptly = errors.New("Worker quit abruptly")

	// ErrTaskNotRegistered is wrapped by GetRegisteredTask's error.
	ErrTaskNotRegistered = errors.New("Task not registered error")
	// ErrWorkerLaunched is sent by LaunchAsync to a worker already launched.
	ErrWorkerLaunched = errors.New("machinist: worker already launched")
	// ErrServerClosed is returned by a Server after Close.
	ErrServerClosed = errors.New("machinist: server closed")
)
