package padlock_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// TestReleaseWithLostReplyReportsReleased: Redis runs a Release, but the
// connection closes before its reply arrives, and padlock sends the
// release again, which finds the token gone. Promise: a Release that
// worked does not report the lock lost: it returns neither ErrNotHeld nor
// ErrLockLost, and Err says ErrReleased.
// Regression: the copy of a Release that worked reported ErrNotHeld.
func TestReleaseWithLostReplyReportsReleased(t *testing.T) {
	l, srv, rdb := newLocker(t)
	hook := hookOn(rdb)
	raw := srv.Client(t)
	ctx := ctxFor(t)
	key := testKey(t)
	// Loads the release script, so that Release sends one EVALSHA.
	if err := mustAcquire(t, l, ctx, key+":warm", padlock.Options{}).Release(ctx); err != nil {
		t.Fatalf("warming up: Release: %v", err)
	}
	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 20 * time.Second})
	lockKey := l.RedisKey(key)
	var n atomic.Int32
	hook.onProcess(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if firstKey(cmd) != lockKey || n.Add(1) != 1 {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		cmd.SetErr(io.EOF) // the connection closed after the server ran it
		return io.EOF
	})
	err := lk.Release(ctx)
	if n.Load() == 0 {
		t.Fatal("scenario not staged: Release sent no command on the lock key")
	}
	if exists := raw.Exists(ctx, lockKey).Val(); exists != 0 {
		t.Fatalf("the key is still there after Release (%v)", err)
	}
	if errors.Is(err, padlock.ErrNotHeld) || errors.Is(err, padlock.ErrLockLost) {
		t.Errorf("Release that Redis ran, its reply lost on a closed connection: %v (ErrNotHeld %v, ErrLockLost %v); want nil, or at most an ErrUnavailable error",
			err, errors.Is(err, padlock.ErrNotHeld), errors.Is(err, padlock.ErrLockLost))
	}
	if got := lk.Err(); got != padlock.ErrReleased {
		t.Errorf("Err after a Release that worked = %v, want ErrReleased", got)
	}
}

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

	// Renewed every second: a renewal a loaded machine runs 2 s late is
	// still in time (1 s leases were lost beside CI at load 23).
	const ttl = 3 * time.Second
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
	time.Sleep(3 * ttl)
	for _, lk := range held {
		if err := lk.Err(); err != nil {
			t.Errorf("lock %q lost after %v of renewal: %v", lk.Key(), 3*ttl, err)
		}
		if d, err := lk.TTL(ctx); err != nil || d <= 0 {
			t.Errorf("TTL(%q) = %v, %v; want the lease still running", lk.Key(), d, err)
		}
		if _, err := other.Acquire(ctx, lk.Key(), padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Errorf("another owner's Acquire(%q): got %v, want padlock.ErrNotAcquired", lk.Key(), err)
		}
	}
}
