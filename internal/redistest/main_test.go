package redistest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: the clock of
// the fallback, a process waiter, or a client the harness should have closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, DialProbe)
}
