package padlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// newLocker returns a Locker on a fresh Redis server, closed when t ends.
func newLocker(t testing.TB, opts ...padlock.LockerOption) (*padlock.Locker, *redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := padlock.New(rdb, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l, srv, rdb
}

// testKey returns a key unique to t.
func testKey(t testing.TB) string { return strings.ReplaceAll(t.Name(), "/", ":") }

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t testing.TB, l *padlock.Locker, ctx context.Context, key string, o padlock.Options) *padlock.Lock {
	t.Helper()
	lk, err := l.Acquire(ctx, key, o)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return lk
}
