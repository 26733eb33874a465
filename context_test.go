package padlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

func TestReentrantThroughContext(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	outer := mustAcquire(t, l, ctx, key, padlock.Options{})
	guarded := outer.Context(ctx)
	if padlock.FromContext(guarded) != outer {
		t.Fatal("FromContext does not return the lock the context carries")
	}
	if padlock.FromContext(ctx) != nil {
		t.Fatal("FromContext of a plain context is not nil")
	}

	rt := redistest.CountRoundTrips()
	rdb.AddHook(rt)
	inner, err := l.Acquire(guarded, key, padlock.Options{})
	if err != nil {
		t.Fatalf("reentrant Acquire: %v", err)
	}
	if n := rt.Load(); n != 0 {
		t.Fatalf("reentrant Acquire cost %d round trips, want 0", n)
	}
	if inner.Fence() != outer.Fence() || inner.Token() != outer.Token() || inner.Key() != key {
		t.Fatalf("reentrant handle (fence %d) is not the outer lock (fence %d)", inner.Fence(), outer.Fence())
	}
	// A nested guarded context carries the inner handle.
	nested := inner.Context(guarded)
	if padlock.FromContext(nested) != inner {
		t.Fatal("FromContext does not return the innermost lock")
	}

	if err := inner.Release(ctx); err != nil {
		t.Fatalf("inner Release: %v", err)
	}
	if outer.Err() != nil || guarded.Err() != nil {
		t.Fatalf("inner Release ended the outer lock: %v, %v", outer.Err(), guarded.Err())
	}
	// The inner handle's scope is over: its contexts end, the outer's don't.
	if !errors.Is(context.Cause(nested), padlock.ErrReleased) {
		t.Fatalf("context of the released inner handle: cause %v, want ErrReleased", context.Cause(nested))
	}
	if _, err := l.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("after inner Release the key must still be held: got %v", err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatalf("outer Release: %v", err)
	}
	if !errors.Is(context.Cause(guarded), padlock.ErrReleased) {
		t.Fatalf("guarded context cause after outer Release = %v, want ErrReleased", context.Cause(guarded))
	}
	again := mustAcquire(t, l, ctx, key, padlock.Options{})
	again.Release(ctx)
}

func TestReentrancyIsPerKeyAndLocker(t *testing.T) {
	l, _, rdb := newLocker(t)
	other := padlock.MustNew(t, rdb, padlock.WithKeyPrefix("other:"))
	t.Cleanup(func() { other.Close() })
	ctx := ctxFor(t)
	key := testKey(t)
	outer := mustAcquire(t, l, ctx, key, padlock.Options{})
	defer outer.Release(ctx)
	guarded := outer.Context(ctx)

	// Another key through the same Locker is a real, separate lock.
	second := mustAcquire(t, l, guarded, key+":second", padlock.Options{})
	if second.Fence() == outer.Fence() {
		t.Fatal("a different key reused the outer lock")
	}
	second.Release(ctx)
	// The same key through another Locker is not reentrant either.
	third := mustAcquire(t, other, guarded, key, padlock.Options{})
	if third.Token() == outer.Token() {
		t.Fatal("another Locker reused the outer lock")
	}
	third.Release(ctx)
}

func TestGuardedContextFollowsParent(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	lk := mustAcquire(t, l, ctx, testKey(t), padlock.Options{})
	defer lk.Release(ctx)
	parent, cancel := context.WithCancel(ctx)
	guarded := lk.Context(parent)
	cancel()
	<-guarded.Done()
	if !errors.Is(guarded.Err(), context.Canceled) {
		t.Fatalf("guarded Err = %v, want Canceled from the parent", guarded.Err())
	}
	if lk.Err() != nil {
		t.Fatalf("cancelling a guarded context ended the lock: %v", lk.Err())
	}
}

// TestGuardedContextsDoNotPileUp takes many contexts from one long-held
// lock, each ended by its parent, and checks the lock does not keep them.
func TestGuardedContextsDoNotPileUp(t *testing.T) {
	l := padlock.MustNew(t, redistest.Start(t).Client(t))
	defer l.Close()
	ctx := context.Background()
	lk, err := l.Acquire(ctx, "long-held", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	for range 10000 {
		parent, cancel := context.WithCancel(ctx)
		_ = lk.Context(parent)
		cancel()
	}
	n := padlock.GuardedContexts(lk)
	if n > 64 {
		t.Fatalf("lock keeps %d guarded contexts after 10,000 ended ones, want a handful", n)
	}
}

func BenchmarkLockContext(b *testing.B) {
	l := padlock.MustNew(b, redistest.Start(b).Client(b))
	defer l.Close()
	ctx := context.Background()
	lk, err := l.Acquire(ctx, "bench-context", padlock.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer lk.Release(ctx)
	b.ReportAllocs()
	for b.Loop() {
		parent, cancel := context.WithCancel(ctx)
		if padlock.FromContext(lk.Context(parent)) != lk {
			b.Fatal("FromContext lost the lock")
		}
		cancel()
	}
}
