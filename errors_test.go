package padlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

// TestNotHeldOfALostLockIsLockLost: the ErrNotHeld error of a lock that
// was lost matches ErrLockLost as well, whichever call finds out, and
// whether it finds out from Redis or from the lock's state; that of a
// lock its owner released does not.
func TestNotHeldOfALostLockIsLockLost(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := ctxFor(t)
	calls := []struct {
		name string
		call func(*padlock.Lock) error
	}{
		{"Release", func(lk *padlock.Lock) error { return lk.Release(ctx) }},
		{"Extend", func(lk *padlock.Lock) error { return lk.Extend(ctx, time.Minute) }},
		{"TTL", func(lk *padlock.Lock) error { _, err := lk.TTL(ctx); return err }},
		{"Detach", func(lk *padlock.Lock) error { _, err := lk.Detach(); return err }},
	}
	ends := []struct {
		name string
		end  func(t *testing.T, lk *padlock.Lock)
		lost bool
	}{
		// Redis no longer has the lock, and the call is the first to ask.
		{"deleted in Redis", func(t *testing.T, lk *padlock.Lock) {
			if err := rdb.Del(ctx, l.RedisKey(lk.Key())).Err(); err != nil {
				t.Fatal(err)
			}
		}, true},
		// The lock already knows it was lost (Err says ErrLockLost).
		{"found lost before", func(t *testing.T, lk *padlock.Lock) {
			if err := rdb.Del(ctx, l.RedisKey(lk.Key())).Err(); err != nil {
				t.Fatal(err)
			}
			_, _ = lk.TTL(ctx)
			if err := lk.Err(); err != padlock.ErrLockLost {
				t.Fatalf("Err after TTL found the lock gone: got %v, want ErrLockLost", err)
			}
		}, true},
		{"released", func(t *testing.T, lk *padlock.Lock) {
			if err := lk.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, e := range ends {
		for _, c := range calls {
			switch {
			case !e.lost && c.name == "Release":
				continue // a second Release returns nil
			case e.name == "deleted in Redis" && c.name == "Detach":
				continue // Detach asks no one: it gives up what the lock knows
			}
			t.Run(e.name+"/"+c.name, func(t *testing.T) {
				lk := mustAcquire(t, l, ctx, testKey(t), padlock.Options{})
				defer func() { _ = lk.Release(context.Background()) }()
				e.end(t, lk)
				err := c.call(lk)
				if !errors.Is(err, padlock.ErrNotHeld) {
					t.Fatalf("got %v, want ErrNotHeld", err)
				}
				if got := errors.Is(err, padlock.ErrLockLost); got != e.lost {
					t.Fatalf("errors.Is(%v, ErrLockLost): got %v, want %v", err, got, e.lost)
				}
			})
		}
	}
}
