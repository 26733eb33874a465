package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
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

// TestRedlockEveryMajority: for every set of nodes on which someone else
// holds the key, a Redlock Acquire succeeds exactly when the free nodes are
// a majority; it then holds the key on every free node, and either way it
// leaves the other owner's nodes alone and, when it fails, none of its own
// behind.
func TestRedlockEveryMajority(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			l, servers := startRedlock(t, n)
			ctx := ctxFor(t)
			rdbs := make([]*redis.Client, n)
			for i, s := range servers {
				rdbs[i] = s.Client(t)
			}
			need := n/2 + 1
			for mask := range 1 << n {
				key := fmt.Sprintf("%s:%d", testKey(t), mask)
				lockKey := "padlock:{" + key + "}"
				free := 0
				for i, rdb := range rdbs {
					if mask&(1<<i) == 0 {
						free++
						continue
					}
					if err := rdb.Set(ctx, lockKey, "someone-else", time.Minute).Err(); err != nil {
						t.Fatal(err)
					}
				}
				lk, err := l.Acquire(ctx, key, padlock.Options{NoRenew: true})
				if (err == nil) != (free >= need) {
					t.Fatalf("mask %0*b: %d of %d nodes free, Acquire: %v", n, mask, free, n, err)
				}
				if err != nil && !errors.Is(err, padlock.ErrNotAcquired) {
					t.Fatalf("mask %0*b: %v, want ErrNotAcquired", n, mask, err)
				}
				for i, rdb := range rdbs {
					v, _ := rdb.Get(ctx, lockKey).Result()
					switch {
					case mask&(1<<i) != 0 && v != "someone-else":
						t.Fatalf("mask %0*b: node %d holds %q, want the other owner's value untouched", n, mask, i, v)
					case mask&(1<<i) == 0 && err == nil && padlock.StoredToken(v) != lk.Token():
						t.Fatalf("mask %0*b: node %d holds %q, want the lock's token", n, mask, i, v)
					case mask&(1<<i) == 0 && err != nil && v != "":
						t.Fatalf("mask %0*b: failed Acquire left %q on node %d", n, mask, v, i)
					}
				}
				if lk != nil {
					lk.Release(ctx)
				}
			}
		})
	}
}

// TestRedlockExtendReachesEveryNode: Extend resets the lease on every node.
func TestRedlockExtendReachesEveryNode(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 3)
	ctx := ctxFor(t)
	key := testKey(t)
	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Second, NoRenew: true})
	defer lk.Release(ctx)
	time.Sleep(300 * time.Millisecond)
	// A loaded machine may stall past every node's timeout at once: an
	// Extend that reached no node is tried again (it changes nothing then).
	err := lk.Extend(ctx, time.Second)
	for try := 0; try < 3 && errors.Is(err, padlock.ErrUnavailable); try++ {
		err = lk.Extend(ctx, time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range servers {
		ttl, err := s.Client(t).PTTL(ctx, "padlock:{"+key+"}").Result()
		if err != nil || ttl <= 800*time.Millisecond {
			t.Fatalf("node %d after Extend(1s): PTTL %v, %v; want the lease reset (above 800ms)", i, ttl, err)
		}
	}
}
