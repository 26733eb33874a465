package decorator_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// newLocker returns a Locker on a fresh Redis server, closed when t ends,
// and a client to the same server.
func newLocker(t testing.TB) (*padlock.Locker, *redis.Client) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	return lockerOn(t, rdb), rdb
}

// lockerOn returns a Locker on rdb, closed when t ends.
func lockerOn(t testing.TB, rdb redis.UniversalClient) *padlock.Locker {
	t.Helper()
	l, err := padlock.New(rdb)
	if err != nil {
		t.Fatalf("padlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// hold takes key on l for the test, released when t ends.
func hold(t testing.TB, l *padlock.Locker, key string) *padlock.Lock {
	t.Helper()
	lk, err := l.Acquire(context.Background(), key, padlock.Options{})
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	t.Cleanup(func() { _ = lk.Release(context.Background()) })
	return lk
}

// checkFree fails t unless key can be taken at once.
func checkFree(t testing.TB, l *padlock.Locker, key string) {
	t.Helper()
	lk, err := l.Acquire(context.Background(), key, padlock.Options{})
	if err != nil {
		t.Fatalf("Acquire(%q) after the call: got %v, want the lock released", key, err)
	}
	_ = lk.Release(context.Background())
}
