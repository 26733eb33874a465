package padlock

import (
	"context"
	"testing"
	"time"
)

// TestRenewalInFlightChangesNothingAfterResume: the watchdog's renewal,
// with the lock's 300ms lease, is on its way when the lock is detached, and
// runs after another Locker resumed the lock with a 10s lease. Redis then
// holds 300ms; the resumed lock must not report held once another owner can
// take the key.
// It runs in a bubble.
// Regression: Resume kept the token; the late renewal cut the new lease.
func TestRenewalInFlightChangesNothingAfterResume(t *testing.T) {
	inBubble(t, func(t *testing.T, bb *bubble) {
		const ttl = 300 * time.Millisecond
		hook := &lagHook{
			before:      func(args []any) bool { return extendCall(args, ttl) },
			beforeDelay: 100 * time.Millisecond, // within the renewal's deadline
			held:        make(chan struct{}, 1),
		}
		rdb := bb.client()
		rdb.AddHook(hook)
		a := bb.locker(rdb)
		b := bb.locker(bb.client())
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
		contend(t, bb.client(), key, resumed, 0)
	})
}
