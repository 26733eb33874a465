package padlock_test

import (
	"context"
	"flag"
	"testing"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Tests kill and pause servers on purpose; go-redis would log every
	// failed dial that follows, burying the test output.
	redis.SetLogger(quiet{})
	flag.Parse()
	redistest.SideBySide(parallelTests)
	// Spare servers for the Redlock tests, whose nodes vote only once up
	// for the max lease: started now, they are old enough by then.
	goleak.VerifyTestMain(redistest.WithSpares(m, 48), redistest.DialProbe)
}

// parallelTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise (go test's default is the number of
// CPUs). They are the tests on real servers of their own that mostly wait
// for them: to start, to fail over, to time out, for a lease. No more than
// two Clusters or Sentinel deployments run at once even so (redistest's
// heavy slots): their tests time renewals and failovers. The tests on
// virtual time run one at a time, before them.
const parallelTests = 4

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
