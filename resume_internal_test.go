package padlock

import (
	"context"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// TestRenewalInFlightChangesNothingAfterResume: the watchdog's renewal,
// with the lock's 300ms lease, is on its way when the lock is detached, and
// runs after another Locker resumed the lock with a 10s lease. Redis then
// holds 300ms; the resumed lock must not report held once another owner can
// take the key.
// Regression: Resume kept the token; the late renewal cut the new lease.
func TestRenewalInFlightChangesNothingAfterResume(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = 300 * time.Millisecond
	hook := &lagHook{
		before:      func(args []any) bool { return extendCall(args, ttl) },
		beforeDelay: 100 * time.Millisecond, // within the renewal's deadline
		held:        make(chan struct{}, 1),
	}
	rdb := srv.Client(t)
	rdb.AddHook(hook)
	a := mustNew(t, rdb)
	defer a.Close()
	b := mustNew(t, srv.Client(t))
	defer b.Close()
	ctx := context.Background()
	const key = "detached"
	lk, err := a.Acquire(ctx, key, Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	hook.armed.Store(true)
	select {
	case <-hook.held:
	case <-time.After(5 * time.Second):
		t.Fatal("no renewal went out")
	}
	own, err := lk.Detach()
	if err != nil {
		t.Fatalf("Detach: %v", err)
	}
	resumed, err := b.Resume(ctx, own, Options{TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	defer resumed.Release(ctx)
	time.Sleep(150*time.Millisecond + ttl) // the renewal runs, then its lease ends
	contend(t, srv.Client(t), key, resumed, 0)
}
