package padlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

// TestHeldAndWaiting checks a Locker's view of its own locks and waiters.
func TestHeldAndWaiting(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	if h := l.Held(); len(h) != 0 {
		t.Fatalf("fresh Locker: got %+v held, want none", h)
	}
	// A lease renewed soon (TTL/3), long enough that a loaded machine
	// renews it in time (1.5 s once lost it beside CI at load 20).
	lk := mustAcquire(t, l, ctx, key+":{braced}", padlock.Options{TTL: 3 * time.Second})
	fixed := mustAcquire(t, l, ctx, key+":fixed", padlock.Options{NoRenew: true})
	done := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := l.Acquire(wctx, key+":fixed", padlock.Options{Wait: time.Minute})
		done <- err
	}()
	deadline := time.Now().Add(time.Minute)
	renewed := func() bool {
		for _, h := range l.Held() {
			if h.Key == key+":{braced}" && h.Renewals > 0 {
				return true
			}
		}
		return false
	}
	for len(l.Waiting()) == 0 || !renewed() {
		if err := lk.Err(); err != nil {
			t.Fatalf("the renewed lock was lost before its first renewal: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no waiter or no renewal within a minute: held %+v, waiting %+v", l.Held(), l.Waiting())
		}
		time.Sleep(5 * time.Millisecond)
	}
	held := l.Held()
	if len(held) != 2 {
		t.Fatalf("got %d held, want 2: %+v", len(held), held)
	}
	for i, want := range []struct {
		key     string
		renew   bool
		waiters int
		lk      *padlock.Lock
	}{{key + ":{braced}", true, 0, lk}, {key + ":fixed", false, 1, fixed}} {
		h := held[i]
		if h.Key != want.key || h.Renew != want.renew || h.Waiters != want.waiters || h.Fence != want.lk.Fence() || h.Token != want.lk.Token() {
			t.Errorf("held[%d]: got %+v, want key %q, renew %v, %d waiters, the lock's fence and token", i, h, want.key, want.renew, want.waiters)
		}
		if h.LeaseLeft <= 0 || h.Since.IsZero() {
			t.Errorf("held[%d]: got lease left %v, since %v; want both set", i, h.LeaseLeft, h.Since)
		}
	}
	if w := l.Waiting(); len(w) != 1 || w[0].Key != key+":fixed" || w[0].Waiters != 1 {
		t.Errorf("got waiting %+v, want one waiter for %q", w, key+":fixed")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter: got %v, want Canceled", err)
	}
	_ = lk.Release(ctx)
	_ = fixed.Release(ctx)
	if h, w := l.Held(), l.Waiting(); len(h) != 0 || len(w) != 0 {
		t.Errorf("after release: got held %+v, waiting %+v, want none", h, w)
	}
}
