// Package errs holds machinery's broker errors, for programs and brokers
// of their own written against machinery v1 that use them. machinist's
// brokers report the errors of brokers/iface (ErrTaskNotFound,
// ErrLeaseLost …), which errors.Is tells apart.
package errs

import (
	"errors"
	"fmt"
)

// ErrCouldNotUnmarshalTaskSignature is the error of a message that is not
// a task signature.
type ErrCouldNotUnmarshalTaskSignature struct {
	msg    []byte
	reason string
}

// Error names the message and why it could not be read.
func (e ErrCouldNotUnmarshalTaskSignature) Error() string {
	return fmt.Sprintf("Could not unmarshal '%s' into a task signature: %v", e.msg, e.reason)
}

// NewErrCouldNotUnmarshalTaskSignature returns the error of msg, which
// could not be read as a task signature because of err.
func NewErrCouldNotUnmarshalTaskSignature(msg []byte, err error) ErrCouldNotUnmarshalTaskSignature {
	return ErrCouldNotUnmarshalTaskSignature{msg: msg, reason: err.Error()}
}

// ErrCouldNotUnmarshaTaskSignature is ErrCouldNotUnmarshalTaskSignature
// under the name machinery v1 spelled it with.
type ErrCouldNotUnmarshaTaskSignature = ErrCouldNotUnmarshalTaskSignature

// NewErrCouldNotUnmarshaTaskSignature is NewErrCouldNotUnmarshalTaskSignature
// under the name machinery v1 spelled it with.
func NewErrCouldNotUnmarshaTaskSignature(msg []byte, err error) ErrCouldNotUnmarshalTaskSignature {
	return NewErrCouldNotUnmarshalTaskSignature(msg, err)
}

// ErrConsumerStopped says that an operation needs a consumer that has
// stopped.
var ErrConsumerStopped = errors.New("the server has been stopped")

// ErrStopTaskDeletion is what machinery's brokers returned for a failed
// task with StopTaskDeletionOnError, to keep it in its source queue.
// machinist archives a failed task whatever the flag says.
var ErrStopTaskDeletion = errors.New("task should not be deleted")
