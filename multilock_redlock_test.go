package padlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

// On Redlock the keys are taken one by one in sorted order, with the same
// rollback; fences are 0.
func TestAcquireAllRedlock(t *testing.T) {
	l, servers := startRedlock(t, 3)
	other := redlockOn(t, servers)
	ctx := ctxFor(t)
	m, err := l.AcquireAll(ctx, []string{"rl:b", "rl:a"}, padlock.Options{})
	if err != nil {
		t.Fatalf("AcquireAll: %v", err)
	}
	if f := m.Fences(); f[0] != 0 || f[1] != 0 {
		t.Errorf("Fences() = %v on Redlock, want zeros", f)
	}
	if _, err := other.Acquire(ctx, "rl:b", padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Errorf("Acquire of a held key = %v, want ErrNotAcquired", err)
	}
	if err := m.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	holder := mustAcquire(t, other, ctx, "rl:c", padlock.Options{})
	defer holder.Release(ctx)
	if _, err := l.AcquireAll(ctx, []string{"rl:a", "rl:c"}, padlock.Options{Wait: 200 * time.Millisecond}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("AcquireAll with rl:c held = %v, want ErrNotAcquired", err)
	}
	// The rollback gave rl:a back.
	lk := mustAcquire(t, other, ctx, "rl:a", padlock.Options{})
	lk.Release(ctx)
}
