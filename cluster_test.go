package padlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

func TestClusterExclusionAcrossSlots(t *testing.T) {
	t.Parallel()
	c, l1 := startCluster(t)
	l2 := padlock.MustNew(t, c.Client(t)) // another process
	defer l2.Close()
	ctx := context.Background()
	keys := clusterKeys(l1, 3, 2)

	// Hold one lock per key for a moment: each node must carry some.
	var held []*padlock.Lock
	for _, nodeKeys := range keys {
		for _, k := range nodeKeys {
			lk, err := l1.Acquire(ctx, k, padlock.Options{})
			if err != nil {
				t.Fatalf("Acquire(%q): %v", k, err)
			}
			held = append(held, lk)
		}
	}
	for i, n := range c.Nodes() {
		var locks int
		for _, k := range n.Keys(t) {
			if strings.HasPrefix(k, padlock.DefaultKeyPrefix+"{") {
				locks++
			}
		}
		if locks != len(keys[i]) {
			t.Errorf("node %d holds %d lock keys, want %d: the locks should spread over all nodes", i, locks, len(keys[i]))
		}
	}
	for _, lk := range held {
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}

	// Many owners in two processes contend for keys on every node.
	const workers, rounds = 6, 5
	var wg sync.WaitGroup
	for _, nodeKeys := range keys {
		for _, k := range nodeKeys {
			var inside atomic.Int32 // owners inside the critical section
			var lastFence atomic.Int64
			for w := range workers {
				l := l1
				if w%2 == 1 {
					l = l2
				}
				wg.Go(func() {
					for range rounds {
						lk, err := l.Acquire(ctx, k, padlock.Options{Wait: 20 * time.Second})
						if err != nil {
							t.Errorf("Acquire(%q): %v", k, err)
							return
						}
						if n := inside.Add(1); n != 1 {
							t.Errorf("key %q: %d owners at once, want 1", k, n)
						}
						if f, last := lk.Fence(), lastFence.Swap(lk.Fence()); f <= last {
							t.Errorf("key %q: fence %d after %d, want it to rise", k, f, last)
						}
						time.Sleep(time.Millisecond)
						inside.Add(-1)
						if err := lk.Release(ctx); err != nil {
							t.Errorf("Release(%q): %v", k, err)
						}
					}
				})
			}
		}
	}
	wg.Wait()
}

func TestClusterRenewalAcrossSlots(t *testing.T) {
	t.Parallel()
	c, l := startCluster(t)
	other := padlock.MustNew(t, c.Client(t))
	defer other.Close()
	ctx := context.Background()

	const ttl = time.Second // renewed every 333ms, with slack for a loaded machine
	var held []*padlock.Lock
	for _, nodeKeys := range clusterKeys(l, 3, 3) {
		for _, k := range nodeKeys {
			lk, err := l.Acquire(ctx, k, padlock.Options{TTL: ttl})
			if err != nil {
				t.Fatalf("Acquire(%q): %v", k, err)
			}
			defer lk.Release(ctx)
			held = append(held, lk)
		}
	}
	time.Sleep(4 * ttl)
	for _, lk := range held {
		if err := lk.Err(); err != nil {
			t.Errorf("lock %q lost after %v of renewal: %v", lk.Key(), 4*ttl, err)
		}
		if d, err := lk.TTL(ctx); err != nil || d <= 0 {
			t.Errorf("TTL(%q) = %v, %v; want the lease still running", lk.Key(), d, err)
		}
		if _, err := other.Acquire(ctx, lk.Key(), padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Errorf("another owner's Acquire(%q): got %v, want padlock.ErrNotAcquired", lk.Key(), err)
		}
	}
}

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

// TestClusterReplicaAckWithoutReplicas: a Cluster of masters only cannot
// confirm a lock on a replica, so WithReplicaAck fails the acquisition,
// and leaves nothing behind, on every node.
func TestClusterReplicaAckWithoutReplicas(t *testing.T) {
	t.Parallel()
	c, l := startCluster(t, padlock.WithReplicaAck(1, 50*time.Millisecond))
	ctx := context.Background()
	for node, nodeKeys := range clusterKeys(l, 3, 1) {
		_, err := l.Acquire(ctx, nodeKeys[0], padlock.Options{})
		if !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 acknowledged") {
			t.Errorf("node %d: Acquire: got %v, want padlock.ErrUnavailable saying no replica acknowledged", node, err)
		}
	}
	var set []string
	for _, nodeKeys := range clusterKeys(l, 3, 1) {
		set = append(set, nodeKeys[0]+":set")
	}
	if m, err := l.AcquireAll(ctx, set, padlock.Options{}); !errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 acknowledged") {
		_ = m.Release(ctx)
		t.Errorf("AcquireAll across the nodes: got %v, want padlock.ErrUnavailable saying no replica acknowledged", err)
	}
	for i, n := range c.Nodes() {
		for _, k := range n.Keys(t) {
			if strings.HasPrefix(k, padlock.DefaultKeyPrefix+"{") {
				t.Errorf("node %d holds lock key %q after the failed acquisitions, want none", i, k)
			}
		}
	}
}
