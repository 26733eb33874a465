package padlock_test

import (
	"context"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

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
