package padlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// TestCloseEndsWaits closes a Locker while three of its Acquires wait for
// a key another Locker holds: each must return ErrClosed at once, not at
// the end of its 30s wait, and fair ones must leave the queue in Redis.
func TestCloseEndsWaits(t *testing.T) {
	for _, tc := range []struct {
		name string
		fair bool
	}{
		{"plain", false},
		{"fair", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			l := mustNew(t, rdb)
			defer l.Close()
			other := mustNew(t, srv.Client(t))
			defer other.Close()
			ctx := context.Background()
			const key, waiters = "closing", 3

			holder, err := other.Acquire(ctx, key, Options{Fair: tc.fair})
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Release(ctx)
			errs := make(chan error, waiters)
			for range waiters {
				go func() {
					lk, err := l.Acquire(ctx, key, Options{Wait: 30 * time.Second, Fair: tc.fair})
					if lk != nil {
						lk.Release(ctx)
					}
					errs <- err
				}()
			}
			waitParked(t, l, key, waiters)

			l.Close()
			bound := time.After(10 * time.Second)
			for range waiters {
				select {
				case err := <-errs:
					if !errors.Is(err, ErrClosed) {
						t.Fatalf("got %v, want ErrClosed", err)
					}
				case <-bound:
					t.Fatal("a waiter still waits 10s after Close; want ErrClosed at once")
				}
			}
			_, _, queue := l.keys.lockKeys(key)
			if n := rdb.LLen(ctx, queue).Val(); n != 0 {
				t.Fatalf("got %d waiters left in the fair queue, want 0", n)
			}
		})
	}
}
