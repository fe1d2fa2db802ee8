package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/v1/brokers/memory"
	"github.com/b6192125/machinist/v1/config"
)

// Every engine a test started is stopped by the Close of what runs on it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// NewPair's broker writes its backend's states, as one Redis's does.
func TestNewPairIsPaired(t *testing.T) {
	b, be := memory.NewPair(memory.OptionsFrom(&config.Config{}))
	defer b.Close()
	defer be.Close()
	if b.Join(be) == nil {
		t.Error("NewPair's broker and backend are not paired")
	}
	other := memory.New(memory.Options{})
	defer other.Close()
	if other.Join(be) != nil {
		t.Error("a broker of another engine is paired with the backend")
	}
}
