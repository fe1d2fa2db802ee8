package rdb

import (
	"os"
	"testing"

	"github.com/b6192125/machinist/internal/redistest"
)

func TestMain(m *testing.M) {
	os.Exit(redistest.RunMain(m))
}
