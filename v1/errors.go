package machinery

import (
	"errors"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

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

// What became of a send that failed. Every error of SendTask, SendChain,
// SendGroup and SendChord (and their WithContext forms) wraps exactly one
// of them; one that ended with its context wraps the context's error too
// (context.DeadlineExceeded or context.Canceled).
var (
	// ErrNotSent says nothing was sent: no request reached the broker
	// (the context ended before it went out, the signature or config was
	// refused, the broker was closed), or the broker refused the task (a
	// duplicate UUID, a unique key held, a cancelled workflow, no
	// aggregator). Nothing of it will run, and a chain, group or chord
	// leaves no PENDING state or record behind (unless the broker refused
	// it because a task with its UUID is queued, or its workflow was
	// cancelled: the states are then that task's, or its workflow's).
	// Sending it again is a first send.
	ErrNotSent = brokers.ErrNotSent
	// ErrMaybeSent says the send may have happened: a request went out
	// and its reply never came (the context ended first, or the
	// connection failed or timed out), or a group was sent in part. The
	// task may be queued and may run. Look it up by its UUID before
	// sending it again: the broker holds it (its Inspector's GetTask), or
	// its state is past PENDING. A send of the same signature (the same
	// UUID) is refused with ErrDuplicateTask of brokers/iface while the
	// first copy is held (queued, scheduled, waiting for a retry or
	// running), so it cannot run twice then; once the first copy has run
	// and the broker has forgotten it, a copy sent again runs again.
	ErrMaybeSent = brokers.ErrMaybeSent
)
