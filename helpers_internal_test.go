package padlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/hashslot"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The helpers of both test packages: the external one (padlock_test)
// reaches them through export_test.go, under the same names but one:
// startLocker is newLocker there (here newLocker builds every Locker).

// startLocker returns a Locker on a fresh Redis server, closed when t ends.
func startLocker(t testing.TB, opts ...LockerOption) (*Locker, *redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := mustNew(t, rdb, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l, srv, rdb
}

// mustNew is New, ending the test when it refuses client. The caller
// closes the Locker.
func mustNew(t testing.TB, client redis.UniversalClient, opts ...LockerOption) *Locker {
	t.Helper()
	l, err := New(client, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// testKey returns a key unique to t.
func testKey(t testing.TB) string { return strings.ReplaceAll(t.Name(), "/", ":") }

// ctxFor returns a context that ends with t, or after 30s.
func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustAcquire is Acquire, ending the test when it fails. A grant whose
// reply came after its lease had run out (errLateGrant: a short lease on
// a loaded machine, under the race detector) was let go by Acquire and is
// asked for again, a few times: taking the lock is the test's setup, not
// what it checks.
func mustAcquire(t testing.TB, l *Locker, ctx context.Context, key string, o Options) *Lock {
	t.Helper()
	lk, err := l.Acquire(ctx, key, o)
	for try := 1; try < 5 && errors.Is(err, errLateGrant) && ctx.Err() == nil; try++ {
		t.Logf("Acquire(%q): %v; asking again", key, err)
		lk, err = l.Acquire(ctx, key, o)
	}
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return lk
}

// startCluster starts a 3-master cluster and returns it with a Locker on
// it, closed when t ends.
func startCluster(t testing.TB, opts ...LockerOption) (*redistest.Cluster, *Locker) {
	t.Helper()
	c := redistest.StartCluster(t, 3)
	l := mustNew(t, c.Client(t), opts...)
	t.Cleanup(func() { l.Close() })
	return c, l
}

// Redlock tests keep leases short so that the delayed-restart rule, which
// holds a node's vote back until it has been up for the max lease, costs a
// freshly started node about a second rather than the default 30s.
const (
	rlMaxLease = time.Second
	// rlNodesVote is how long after start a node surely votes the first
	// time it is asked: uptime comes in whole seconds, and is trusted to be
	// a second less than it says.
	rlNodesVote = rlMaxLease + 2*time.Second
	// Generous for loopback, so that a busy test machine does not pass
	// for a hung node.
	rlNodeTimeout = 250 * time.Millisecond
)

// redlockOn returns a Redlock Locker on servers, with clients of its own
// (another process, as far as Redis can tell), closed when t ends.
func redlockOn(t testing.TB, servers []*redistest.Server, opts ...RedlockOption) *Locker {
	t.Helper()
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		clients[i] = s.Client(t, func(o *redis.Options) {
			o.ContextTimeoutEnabled = true
			// Socket timeouts far above the node timeout, so the timing
			// checks below can only pass if the node timeout bounds calls.
			o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
			// After a pool's size in failed dials go-redis probes a dead node from
			// a goroutine that sees its pool closed only a second later,
			// past goleak's patience. Tests that kill nodes never get there.
			o.PoolSize, o.PipelinePoolSize = 1000, 1000
		})
	}
	opts = append([]RedlockOption{
		WithMaxLease(rlMaxLease),
		WithNodeTimeout(rlNodeTimeout),
		WithDefaults(Options{TTL: rlMaxLease}),
	}, opts...)
	l, err := NewRedlock(clients, opts...)
	if err != nil {
		t.Fatalf("NewRedlock: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// startRedlock starts n real nodes and returns a Locker on them once every
// node has been up long enough to vote. (Waiting for a majority to vote is
// not enough for tests that then take nodes away.)
func startRedlock(t testing.TB, n int, opts ...RedlockOption) (*Locker, []*redistest.Server) {
	t.Helper()
	redistest.Require(t)
	servers := redistest.StartN(t, n)
	time.Sleep(rlNodesVote)
	l := redlockOn(t, servers, opts...)
	awaitVotes(t, l)
	return l, servers
}

// awaitVotes waits until l can take a lock, that is, until enough nodes
// have been up for the max lease.
func awaitVotes(t testing.TB, l *Locker) {
	t.Helper()
	ctx := context.Background()
	var err error
	for deadline := time.Now().Add(rlNodesVote + 5*time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var lk *Lock
		if lk, err = l.Acquire(ctx, "probe:"+testKey(t), Options{NoRenew: true}); err == nil {
			_ = lk.Release(ctx)
			return
		}
	}
	t.Fatalf("nodes never voted: %v", err)
}

// clusterKeys returns perNode user keys for each of nodes cluster nodes:
// keys whose locks fall in node i's share of the slots (StartCluster
// splits them evenly, in order).
func clusterKeys(l *Locker, nodes, perNode int) [][]string {
	keys := make([][]string, nodes)
	for n, left := 0, nodes*perNode; left > 0; n++ {
		k := fmt.Sprintf("order:%d", n)
		node := hashslot.Slot(l.RedisKey(k)) * nodes / hashslot.Count
		if len(keys[node]) < perNode {
			keys[node] = append(keys[node], k)
			left--
		}
	}
	return keys
}
