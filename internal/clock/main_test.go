package clock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind (AfterFunc
// with a non-positive duration starts one).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
