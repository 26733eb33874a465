package padlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// Tests that the lock-lost signal comes before another owner can take the
// key, whatever order Redis runs lease changes in and answers them, and
// that a hand-off never passes on a lock Redis may no longer hold.

// TestNoHandOffAfterRestart: the server restarts without persistence while
// a Locker holds a lock with waiters; another Locker takes the key. A
// waiter that asked after that must not be handed the old lock, the old
// holder's Release must say it was not held, and every lock taken after
// the restart must have a fence above the other Locker's.
func TestNoHandOffAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Real() {
		t.Skip("needs a redis-server to restart")
	}
	a := mustNew(t, srv.Client(t))
	defer a.Close()
	b := mustNew(t, srv.Client(t))
	defer b.Close()
	ctx := context.Background()
	const key = "restart"
	holder, err := a.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	holder.fenceEnd = holder.fence + 5 // as if waiters had queued behind it
	type result = acquireResult
	wait := func() <-chan result {
		got := make(chan result, 1)
		go func() {
			lk, err := a.Acquire(ctx, key, Options{Wait: 20 * time.Second})
			got <- result{lk, err}
		}()
		return got
	}
	first := wait()
	waitParked(t, a, key, 1)

	srv.Restart(t)
	theirs, err := b.Acquire(ctx, key, Options{Wait: 5 * time.Second})
	if errors.Is(err, ErrNotAcquired) {
		// On a loaded machine the first waiter may try the restarted
		// server before the other Locker does (its subscription broke, so
		// it polls) and take the key there: a lock Redis granted anew,
		// which is allowed. The old lock handed on is not.
		firstAfterRestart(t, ctx, first, holder)
		return
	}
	if err != nil {
		t.Fatalf("Acquire after the restart: %v", err)
	}
	second := wait() // asks after the other Locker's Acquire returned
	waitParked(t, a, key, 2)

	if err := holder.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release of a lock the restart lost: %v, want ErrNotHeld", err)
	}
	select {
	case r := <-first:
		if r.lk != nil {
			t.Fatalf("first waiter got a lock (fence %d, Err %v) while the other Locker holds the key (fence %d)", r.lk.Fence(), r.lk.Err(), theirs.Fence())
		}
		t.Fatalf("first waiter done while the key was held: %v", r.err)
	case r := <-second:
		if r.lk != nil {
			t.Fatalf("second waiter got a lock (fence %d, Err %v) while the other Locker holds the key (fence %d)", r.lk.Fence(), r.lk.Err(), theirs.Fence())
		}
		t.Fatalf("second waiter done while the key was held: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := theirs.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i, got := range []<-chan result{first, second} {
		r := <-got
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		if r.lk.Fence() <= theirs.Fence() {
			t.Errorf("waiter %d got fence %d, not above %d of the lock taken after the restart", i, r.lk.Fence(), theirs.Fence())
		}
		r.lk.Release(ctx)
	}
}

// acquireResult is what an Acquire run in a goroutine returned.
type acquireResult struct {
	lk  *Lock
	err error
}

// firstAfterRestart checks a lock the first waiter of
// TestNoHandOffAfterRestart took on the restarted server: Redis granted it
// under a token of its own (a hand-off would carry the old holder's), and
// the old holder's Release says it was not held.
func firstAfterRestart(t *testing.T, ctx context.Context, first <-chan acquireResult, holder *Lock) {
	t.Helper()
	var lk *Lock
	select {
	case r := <-first:
		if r.err != nil {
			t.Fatalf("the other Locker found the key held, but the first waiter has no lock: %v", r.err)
		}
		lk = r.lk
	case <-time.After(5 * time.Second):
		t.Fatal("the other Locker found the key held, and the first waiter has no lock either")
	}
	defer lk.Release(ctx)
	if lk.lease == holder.lease { // handed on: the lease moved with it
		t.Fatal("the first waiter was handed the lock the restart lost")
	}
	if _, err := lk.TTL(ctx); err != nil {
		t.Fatalf("the first waiter's lock is not the one in Redis: %v", err)
	}
	if err := holder.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release of a lock the restart lost: %v, want ErrNotHeld", err)
	}
}

// TestHandedLockLostBeforeWakeUp: a lock handed to a waiter that is lost
// before the waiter wakes is not returned by its Acquire.
func TestHandedLockLostBeforeWakeUp(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := context.Background()
	lk, err := l.Acquire(ctx, "lost-in-hand", Options{})
	if err != nil {
		t.Fatal(err)
	}
	lk.finish(ErrLockLost) // as the watchdog ends a lease it can no longer trust
	a := &acquisition{l: l, key: "lost-in-hand", o: Options{}, id: lk.id}
	got, err := a.receive(ctx, lk)
	if got != nil || err != nil {
		t.Fatalf("receive of a lost lock: %v, %v; want neither, so that the waiter tries Redis", got, err)
	}
	if n, _ := l.store.(single).client.Exists(ctx, lk.id.lockKey()).Result(); n != 0 {
		t.Fatal("the lost lock's key is still in Redis: receive must let it go")
	}
}
