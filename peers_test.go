package padlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

// What the peers' own suites check (bsm/redislock, go-redsync/redsync),
// written anew against padlock's API where it adds to the tests above.

// TestOneOfManyTakesIt: a thousand callers, arriving at random within 50ms,
// each try once for a key nobody releases: exactly one gets it.
func TestOneOfManyTakesIt(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	var (
		got  atomic.Int32
		busy atomic.Int32
		wg   sync.WaitGroup
	)
	for range 1000 {
		wg.Go(func() {
			time.Sleep(rand.N(50 * time.Millisecond))
			lk, err := l.Acquire(ctx, key, padlock.Options{TTL: time.Minute})
			switch {
			case err == nil:
				got.Add(1)
				t.Cleanup(func() { lk.Release(context.Background()) })
			case errors.Is(err, padlock.ErrNotAcquired):
				busy.Add(1)
			default:
				t.Errorf("Acquire: %v", err)
			}
		})
	}
	wg.Wait()
	if got.Load() != 1 || busy.Load() != 999 {
		t.Fatalf("%d callers got the lock and %d were told it is busy, want 1 and 999", got.Load(), busy.Load())
	}
}
