package padlock

import (
	"context"
	"strings"
	"testing"
	"time"

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
	l := New(rdb, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l, srv, rdb
}

// testKey returns a key unique to t.
func testKey(t testing.TB) string { return strings.ReplaceAll(t.Name(), "/", ":") }

// ctxFor returns a context that ends with t, or after 30s.
func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustAcquire is Acquire, ending the test when it fails.
func mustAcquire(t testing.TB, l *Locker, ctx context.Context, key string, o Options) *Lock {
	t.Helper()
	lk, err := l.Acquire(ctx, key, o)
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
	l := New(c.Client(t), opts...)
	t.Cleanup(func() { l.Close() })
	return c, l
}
