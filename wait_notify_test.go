package padlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// TestClusterWakeUpAcrossSlots checks the release notices (sharded pub/sub)
// for a key on every node: the waiter makes no attempt while the lock is
// held, however eager its retry strategy, and wakes as soon as it is
// released.
func TestClusterWakeUpAcrossSlots(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	calls := redistest.CountCommands("evalsha", "eval")
	cc := c.Client(t)
	cc.AddHook(calls)
	waiters := padlock.MustNew(t, cc)
	defer waiters.Close()
	padlock.SetNoticeRecheck(waiters, time.Hour) // only a notice can wake the waiter
	holders := padlock.MustNew(t, c.Client(t))
	defer holders.Close()
	ctx := context.Background()

	for node, nodeKeys := range clusterKeys(waiters, 3, 1) {
		key := nodeKeys[0]
		holder, err := holders.Acquire(ctx, key, padlock.Options{TTL: time.Minute})
		if err != nil {
			t.Fatalf("node %d: holder's Acquire(%q): %v", node, key, err)
		}
		done := make(chan time.Time, 1)
		go func() {
			lk, err := waiters.Acquire(ctx, key, padlock.Options{Wait: 30 * time.Second, Retry: padlock.LinearBackoff(time.Millisecond)})
			if err != nil {
				t.Errorf("node %d: waiter: %v", node, err)
				close(done)
				return
			}
			done <- time.Now()
			_ = lk.Release(ctx)
		}()
		padlock.WaitForWaiters(t, waiters, key, 1)
		before := calls.Load()
		time.Sleep(200 * time.Millisecond)
		// At most two attempts may land inside this window: one the
		// waiter decided on, by its retry strategy, just before the
		// subscription went live, and the one it makes once it is live.
		// A 1ms retry strategy would make ~200.
		if polled := calls.Load() - before; polled > 2 {
			t.Errorf("node %d: the waiter made %d attempts while the lock was held, want at most 2", node, polled)
		}
		released := time.Now()
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("node %d: Release: %v", node, err)
		}
		select {
		case at, ok := <-done:
			if ok {
				t.Logf("node %d: the waiter got the lock %v after the release", node, at.Sub(released))
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("node %d: no wake-up after the release: the notice did not arrive", node)
		}
	}
}
