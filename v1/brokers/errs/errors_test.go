package errs_test

import (
	"errors"
	"testing"

	"github.com/b6192125/machinist/v1/brokers/errs"
)

func TestErrors(t *testing.T) {
	err := errs.NewErrCouldNotUnmarshalTaskSignature([]byte("{bad"), errors.New("unexpected end of JSON input"))
	if got, want := err.Error(), "Could not unmarshal '{bad' into a task signature: unexpected end of JSON input"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var typo errs.ErrCouldNotUnmarshaTaskSignature = errs.NewErrCouldNotUnmarshaTaskSignature([]byte("x"), errors.New("y"))
	var target errs.ErrCouldNotUnmarshalTaskSignature
	if !errors.As(error(typo), &target) {
		t.Error("machinery's spelling is not the same type")
	}
	if errs.ErrConsumerStopped.Error() != "the server has been stopped" || errs.ErrStopTaskDeletion.Error() != "task should not be deleted" {
		t.Error("the sentinel errors' texts are not machinery's")
	}
}
