package padlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

func TestReleaseAfter(t *testing.T) {
	l, srv, rdb := newLocker(t)
	other := padlock.MustNew(t, srv.Client(t))
	t.Cleanup(func() { other.Close() })
	ctx := ctxFor(t)
	key := testKey(t)

	t.Run("keeps the key for d, then frees it", func(t *testing.T) {
		lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Minute})
		if err := lk.ReleaseAfter(ctx, 700*time.Millisecond); err != nil {
			t.Fatalf("ReleaseAfter: %v", err)
		}
		if !errors.Is(lk.Err(), padlock.ErrReleased) {
			t.Errorf("Err() = %v, want ErrReleased", lk.Err())
		}
		if d := rdb.PTTL(ctx, l.RedisKey(key)).Val(); d <= 0 || d > 700*time.Millisecond {
			t.Errorf("PTTL = %v, want (0, 700ms]", d)
		}
		if _, err := other.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Errorf("Acquire within d = %v, want ErrNotAcquired", err)
		}
		time.Sleep(900 * time.Millisecond)
		lk2 := mustAcquire(t, other, ctx, key, padlock.Options{})
		lk2.Release(ctx)
		if err := lk.ReleaseAfter(ctx, time.Second); err != nil {
			t.Errorf("second ReleaseAfter = %v, want nil", err)
		}
	})
	t.Run("owner-checked", func(t *testing.T) {
		lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Minute})
		rdb.Del(ctx, l.RedisKey(key)) // lost
		lk2 := mustAcquire(t, other, ctx, key, padlock.Options{TTL: time.Minute})
		defer lk2.Release(ctx)
		if err := lk.ReleaseAfter(ctx, time.Second); !errors.Is(err, padlock.ErrNotHeld) {
			t.Errorf("ReleaseAfter of a lost lock = %v, want ErrNotHeld", err)
		}
		if d := rdb.PTTL(ctx, l.RedisKey(key)).Val(); d < 50*time.Second {
			t.Errorf("the new holder's lease = %v after a stale ReleaseAfter, want untouched (about 1m)", d)
		}
	})
}
