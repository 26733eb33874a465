package padlock

import (
	"context"
	"errors"
	"fmt"
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
	// The detach and resume must come while the lock holds, within its
	// 300 ms lease: a loaded machine may stall past it (Detach or Resume
	// then says ErrNotHeld, rightly), which says nothing of the renewal in
	// flight, so that is tried again, on a fresh key, a few times.
	var key string
	var resumed *Lock
	for try := 1; ; try++ {
		key = fmt.Sprintf("detached-%d", try)
		taken := time.Now()
		// A 300 ms lease whose grant a loaded machine answers late is let
		// go (errLateGrant); mustAcquire asks again.
		lk := mustAcquire(t, a, ctx, key, Options{TTL: ttl})
		hook.armed.Store(true)
		select {
		case <-hook.held:
		case <-time.After(5 * time.Second):
			t.Fatal("no renewal went out")
		}
		own, err := lk.Detach()
		if err == nil {
			if resumed, err = b.Resume(ctx, own, Options{TTL: 10 * time.Second}); err == nil {
				break
			}
		}
		if try == 3 || !errors.Is(err, ErrNotHeld) || !leaseRanOut(taken, ttl) {
			t.Fatalf("Detach and Resume: %v", err)
		}
		t.Logf("try %d: the %v lease ran out %v after the lock was taken, before it was resumed (a loaded machine): %v",
			try, ttl, time.Since(taken).Round(time.Millisecond), err)
		hook.armed.Store(false)
		select {
		case <-hook.held:
		default:
		}
	}
	defer resumed.Release(ctx)
	time.Sleep(150*time.Millisecond + ttl) // the renewal runs, then its lease ends
	contend(t, srv.Client(t), key, resumed, 0)
}
