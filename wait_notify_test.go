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
// released. In both modes the release grants the key to the waiter of the
// other Locker, so the waiter holds it from the grant's notice, with no
// attempt after the release either.
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

	for node, nodeKeys := range clusterKeys(waiters, 3, 2) {
		for i, fair := range []bool{false, true} {
			wakeUpOnNode(t, ctx, holders, waiters, calls, node, nodeKeys[i], fair)
		}
	}
}

// wakeUpOnNode is one key of TestClusterWakeUpAcrossSlots, in the default
// or the fair mode.
func wakeUpOnNode(t *testing.T, ctx context.Context, holders, waiters *padlock.Locker, calls *redistest.Counter, node int, key string, fair bool) {
	t.Helper()
	holder, err := holders.Acquire(ctx, key, padlock.Options{TTL: time.Minute, Fair: fair})
	if err != nil {
		t.Fatalf("node %d: holder's Acquire(%q): %v", node, key, err)
	}
	got := make(chan *padlock.Lock, 1)
	go func() {
		lk, err := waiters.Acquire(ctx, key, padlock.Options{Wait: 30 * time.Second, Retry: padlock.LinearBackoff(time.Millisecond), Fair: fair})
		if err != nil {
			t.Errorf("node %d, fair %v: waiter: %v", node, fair, err)
		}
		got <- lk
	}()
	padlock.WaitForWaiters(t, waiters, key, 1)
	before := calls.Load()
	time.Sleep(200 * time.Millisecond)
	// At most two attempts may land inside this window: one the
	// waiter decided on, by its retry strategy, just before the
	// subscription went live, and the one it makes once it is live.
	// A 1ms retry strategy would make ~200.
	if polled := calls.Load() - before; polled > 2 {
		t.Errorf("node %d, fair %v: the waiter made %d attempts while the lock was held, want at most 2", node, fair, polled)
	}
	released := time.Now()
	tried := calls.Load()
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("node %d: Release: %v", node, err)
	}
	select {
	case lk := <-got:
		if lk == nil {
			return
		}
		t.Logf("node %d, fair %v: the waiter got the lock %v after the release", node, fair, time.Since(released))
		if n := calls.Load() - tried; n != 1 {
			t.Errorf("node %d, fair %v: the waiter made %d attempts after the release; want one: the release grants it the key, and its next attempt claims the grant", node, fair, n)
		}
		_ = lk.Release(ctx)
	case <-time.After(20 * time.Second):
		t.Fatalf("node %d, fair %v: no wake-up after the release: the notice did not arrive", node, fair)
	}
}
