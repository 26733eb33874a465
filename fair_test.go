package padlock_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// TestFairOrder has waiters in separate Lockers (as if separate processes)
// arrive one after another, and checks they get the lock in that order.
func TestFairOrder(t *testing.T) {
	l, srv, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	o := padlock.Options{Fair: true, Wait: 20 * time.Second}

	holder := mustAcquire(t, l, ctx, key, o)
	const waiters = 6
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		wl := padlock.New(srv.Client(t))
		t.Cleanup(func() { wl.Close() })
		wg.Go(func() {
			lk, err := wl.Acquire(ctx, key, o)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			lk.Release(ctx)
		})
		waitQueueLen(t, srv.Client(t), key, i+1)
	}
	holder.Release(ctx)
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("waiters got the lock in order %v, want arrival order", order)
		}
	}
	if len(order) != waiters {
		t.Fatalf("%d of %d waiters got the lock", len(order), waiters)
	}
}

// TestFairNewcomerDoesNotJump checks that a fair Acquire without a wait
// does not take a key that is free but promised to a queued waiter.
func TestFairNewcomerDoesNotJump(t *testing.T) {
	l, srv, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	// A queued waiter in "another process" whose notice we hold back by
	// queueing it by hand: it is first in line for the next 2 seconds.
	queue := "padlock:{" + key + "}:queue"
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	rdb.RPush(ctx, queue, strconv.FormatInt(now.UnixMilli()+2000, 10)+":ghost")
	_, err = l.Acquire(ctx, key, padlock.Options{Fair: true})
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("fair newcomer with an older waiter queued: got %v, want ErrNotAcquired", err)
	}
	// Once the ghost's wait has run out it is dropped, and the key is
	// taken by the next waiter within its own wait.
	lk, err := l.Acquire(ctx, key, padlock.Options{Fair: true, Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("after the dead waiter's wait ran out: %v", err)
	}
	lk.Release(ctx)
	_ = srv
}

// TestFairWaiterThatGivesUpLeavesQueue checks a waiter that runs out of
// time takes itself out of the queue instead of blocking the next one.
func TestFairWaiterThatGivesUpLeavesQueue(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	holder := mustAcquire(t, l, ctx, key, padlock.Options{Fair: true})

	_, err := l.Acquire(ctx, key, padlock.Options{Fair: true, Wait: 100 * time.Millisecond})
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("got %v, want ErrNotAcquired", err)
	}
	queue := "padlock:{" + key + "}:queue"
	if entries := rdb.LRange(ctx, queue, 0, -1).Val(); len(entries) != 0 {
		t.Fatalf("queue after the waiter gave up: %v, want empty", entries)
	}
	holder.Release(ctx)
	if n := rdb.Exists(ctx, queue).Val(); n != 0 {
		t.Fatalf("queue key still exists after everyone left")
	}
}

// waitQueueLen waits until key's fair queue holds n waiters.
func waitQueueLen(t *testing.T, rdb *redis.Client, key string, n int) {
	t.Helper()
	queue := "padlock:{" + key + "}:queue"
	ctx := ctxFor(t)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got := rdb.LLen(ctx, queue).Val(); got == int64(n) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	entries := rdb.LRange(ctx, queue, 0, -1).Val()
	t.Fatalf("queue %s is %s, want %d waiters", queue, strings.Join(entries, ", "), n)
}
