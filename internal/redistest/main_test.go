package redistest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: the clock of
// the fallback, a process waiter, or a client the harness should have
// closed. Two spares are for TestStartAged.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(WithSpares(m, 2), DialProbe)
}
