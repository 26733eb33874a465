package padlock_test

import (
	"context"
	"flag"
	"strconv"
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
	runSideBySide(parallelTests)
	goleak.VerifyTestMain(m, redistest.DialProbe)
}

// parallelTests is how many of the package's parallel tests run at once
// unless -parallel says otherwise. They are the tests on real servers of
// their own (a Cluster, Redlock nodes, a Sentinel) that mostly wait for
// them to start, fail over or time out, so more of them side by side than
// the CPUs (go test's default) cuts the package's time. No more than two
// Clusters or Sentinel deployments run at once even so (redistest's
// heavy slots), as with go test's default on 2 CPUs: their tests time
// renewals and failovers. The tests on virtual time run one at a time,
// before them.
const parallelTests = 8

// runSideBySide sets -parallel to n when the command line did not set it.
func runSideBySide(n int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
