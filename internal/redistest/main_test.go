package redistest_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/internal/redistest"
)

func TestMain(m *testing.M) {
	code := redistest.RunMain(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
