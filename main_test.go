package padlock_test

import (
	"context"
	"testing"

	"github.com/padlockgo/padlock"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/padlockgo/padlock/internal/redistest"
)

func TestMain(m *testing.M) {
	// Tests kill and pause servers on purpose; go-redis would log every
	// failed dial that follows, burying the test output.
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m, redistest.DialProbe)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// The shared helpers (helpers_internal_test.go), under the names this package's
// tests use: newLocker is startLocker there, where newLocker is the
// package's own constructor of every Locker.
var (
	newLocker    = padlock.StartLocker
	testKey      = padlock.TestKey
	ctxFor       = padlock.CtxFor
	clusterKeys  = padlock.ClusterKeys
	mustAcquire  = padlock.MustAcquire
	startCluster = padlock.StartCluster
	startRedlock = padlock.StartRedlock
	redlockOn    = padlock.RedlockOn
	awaitVotes   = padlock.AwaitVotes
)

const (
	rlMaxLease    = padlock.RLMaxLease
	rlNodesVote   = padlock.RLNodesVote
	rlNodeTimeout = padlock.RLNodeTimeout
)
