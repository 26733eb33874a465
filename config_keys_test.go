package padlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/hashslot"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestKeysWithBracesAndPrefix(t *testing.T) {
	l, _, rdb := newLocker(t, padlock.WithKeyPrefix("app:locks:"))
	ctx := ctxFor(t)
	keys := []string{"a}", "a%7D", "{a}", "a", "}{", "order:{42}:pay"}
	var held []*padlock.Lock
	for _, k := range keys {
		held = append(held, mustAcquire(t, l, ctx, k, padlock.Options{}))
	}
	got, err := rdb.Keys(ctx, "app:locks:{*").Result()
	if err != nil || len(got) != len(keys) {
		t.Fatalf("lock keys %v, %v; want %d distinct ones", got, err, len(keys))
	}
	for _, lk := range held {
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release %q: %v", lk.Key(), err)
		}
	}
}

// TestKeyCountBounded locks many distinct keys and checks that what stays
// behind in Redis does not grow with how many keys were ever locked: on one
// deployment, the single fence counter (Cluster: one per hash slot, see
// TestClusterKeyCountBounded). 40,000 round trips: its client waits up
// to 10 s for a reply, as on Cluster, so that a loaded machine's slow one
// fails nothing; the keys left behind are what it checks.
func TestKeyCountBounded(t *testing.T) {
	srv := redistest.Start(t)
	l := padlock.MustNew(t, srv.Client(t, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second }))
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := srv.DBSize(t)
	lockMany := func(batch, n int) {
		var wg sync.WaitGroup
		for w := range 10 {
			wg.Go(func() {
				for i := w; i < n; i += 10 {
					// Fair ones too: their queue keys must go as well.
					o := padlock.Options{Fair: i%2 == 0}
					lk, err := l.Acquire(ctx, fmt.Sprintf("bounded:%d:%d", batch, i), o)
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					if err := lk.Release(ctx); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			})
		}
		wg.Wait()
	}
	lockMany(1, 10000)
	afterFirst := srv.DBSize(t) - before
	lockMany(2, 10000)
	afterSecond := srv.DBSize(t) - before
	t.Logf("keys left after 10,000 distinct locks: %d; after 20,000: %d", afterFirst, afterSecond)
	if afterFirst != 1 || afterSecond != 1 {
		t.Fatalf("keys left: %d after 10,000 distinct locks, %d after 20,000; want the fence counter alone", afterFirst, afterSecond)
	}
	if keys := srv.Keys(t); len(keys) != 1 || keys[0] != "padlock:fence" {
		t.Fatalf("keys left %q, want only the fence counter padlock:fence", keys)
	}
}

// TestClusterKeyCountBounded: on Cluster each hash slot has its own fence
// counter, so what distinct locks leave behind is bounded by the 16384
// slots, however many keys were locked.
func TestClusterKeyCountBounded(t *testing.T) {
	t.Parallel()
	// 40,000 round trips: on a loaded machine one of them once took longer
	// than the test clients' 1 s read timeout, which says nothing of the
	// keys left behind.
	c := redistest.StartCluster(t, 3)
	l := padlock.MustNew(t, c.Client(t, func(o *redis.ClusterOptions) { o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second }))
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	const n = 20000
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Go(func() {
			for i := w; i < n; i += 10 {
				lk, err := l.Acquire(ctx, fmt.Sprintf("bounded:%d", i), padlock.Options{})
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if err := lk.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	left := 0
	for _, node := range c.Nodes() {
		for _, k := range node.Keys(t) {
			if !strings.HasPrefix(k, "padlock:fence:{") {
				t.Fatalf("node %s: key %q left behind; only fence counters may stay", node, k)
			}
			left++
		}
	}
	t.Logf("%d distinct locks left %d fence counters", n, left)
	if left > hashslot.Count {
		t.Fatalf("%d keys left after %d distinct locks, want at most one per slot (%d)", left, n, hashslot.Count)
	}
}
