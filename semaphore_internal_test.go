package padlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// maxCounter tracks how many holders are inside at once, and the most
// ever seen.
type maxCounter struct{ now, max atomic.Int64 }

func (c *maxCounter) enter() {
	n := c.now.Add(1)
	for {
		m := c.max.Load()
		if n <= m || c.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (c *maxCounter) leave() { c.now.Add(-1) }

// TestSemaphoreNeverExceedsPermits races many goroutines in three Lockers
// (as if three processes) for a semaphore of 3 permits on keys of every
// Cluster node, each holding its permit briefly: the most holders inside
// at once must never pass 3, and every goroutine must get its turn. It
// runs in a bubble (the in-memory Cluster wakes waiters by their timers).
func TestSemaphoreNeverExceedsPermits(t *testing.T) {
	for _, be := range bubbleBackends {
		for _, fair := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fair=%v", be.name, fair), func(t *testing.T) {
				inBubble(t, func(t *testing.T, b *bubble) {
					client := be.start(b)
					const permits, workers, rounds = 3, 12, 4
					var sems []*Semaphore
					for range 3 {
						_, s := newSemaphore(t, client(), permits)
						sems = append(sems, s)
					}
					ctx := context.Background()
					keys := []string{"merchant:1", "merchant:2", "merchant:3"}
					counters := make([]maxCounter, len(keys))
					var wg sync.WaitGroup
					for w := range workers {
						wg.Go(func() {
							s := sems[w%len(sems)]
							for r := range rounds {
								k := (w + r) % len(keys)
								lk, err := s.Acquire(ctx, keys[k], Options{Wait: 60 * time.Second, Fair: fair})
								if err != nil {
									t.Errorf("worker %d: Acquire: %v", w, err)
									return
								}
								counters[k].enter()
								time.Sleep(5 * time.Millisecond)
								counters[k].leave()
								if err := lk.Release(ctx); err != nil {
									t.Errorf("worker %d: Release: %v", w, err)
								}
							}
						})
					}
					wg.Wait()
					for k := range keys {
						if m := counters[k].max.Load(); m > permits || m < 2 {
							t.Errorf("key %s: most holders at once: got %d, want 2..%d", keys[k], m, permits)
						}
					}
				})
			})
		}
	}
}

// TestSemaphoreCrashedHolderFrees has one of two holders "crash" (its
// Locker closed without releasing) while the other goes on renewing:
// the crashed permit stays taken until its lease runs out and then frees
// itself, for a waiter in another Locker. It runs in a bubble.
func TestSemaphoreCrashedHolderFrees(t *testing.T) {
	for _, be := range bubbleBackends {
		t.Run(be.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, b *bubble) {
				client := be.start(b)
				crashed, cs := newSemaphore(t, client(), 2)
				_, s := newSemaphore(t, client(), 2)
				ctx := context.Background()
				const ttl = 600 * time.Millisecond
				live, err := s.Acquire(ctx, "job", Options{TTL: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				defer live.Release(ctx)
				if _, err := cs.Acquire(ctx, "job", Options{TTL: ttl}); err != nil {
					t.Fatal(err)
				}
				crashed.Close() // no release: the permit stays in Redis
				begun := time.Now()
				if _, err := s.Acquire(ctx, "job", Options{}); !errors.Is(err, ErrNotAcquired) {
					t.Fatalf("while the crashed holder's lease runs: got %v, want ErrNotAcquired", err)
				}
				lk, err := s.Acquire(ctx, "job", Options{Wait: 10 * time.Second})
				if err != nil {
					t.Fatalf("after the lease: %v", err)
				}
				defer lk.Release(ctx)
				if d := time.Since(begun); d < ttl/2 {
					t.Errorf("got the permit %v after the crash, want no sooner than the lease (%v) allows", d, ttl)
				}
			})
		})
	}
}

// TestSemaphoreLostSignal pauses the server under a held permit: Done
// must close, and the guarded context end with ErrLockLost, before the
// lease could have run out in Redis. It runs in a bubble, where the
// pause holds every command for a minute.
func TestSemaphoreLostSignal(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		_, s := newSemaphore(t, b.client(), 2)
		ctx := context.Background()
		const ttl = 900 * time.Millisecond
		sent := time.Now()
		lk, err := s.Acquire(ctx, "k", Options{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Release(ctx)
		guarded := lk.Context(ctx)
		b.srv.Pause(time.Minute)
		// The signal is due at ValidUntil, which must come before the lease
		// can end in Redis; Err says lost from that moment on, whether or not
		// a loaded machine has let the watchdog run yet.
		until := lk.ValidUntil()
		if !until.Before(sent.Add(ttl)) {
			t.Errorf("ValidUntil %v after the acquire was sent, want before the lease (%v) ends", until.Sub(sent), ttl)
		}
		time.Sleep(time.Until(until))
		if err := lk.Err(); !errors.Is(err, ErrLockLost) {
			t.Errorf("Err at ValidUntil: got %v, want ErrLockLost", err)
		}
		select {
		case <-lk.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done never closed under a paused server")
		}
		if err := context.Cause(guarded); !errors.Is(err, ErrLockLost) {
			t.Errorf("guarded context's cause: got %v, want ErrLockLost", err)
		}
	})
}

// TestSemaphoreRenewedPastTTL holds permits for several leases: the
// watchdog keeps them (one batch for all), and the holders never lose
// them nor let a third one in. It runs in a bubble.
func TestSemaphoreRenewedPastTTL(t *testing.T) {
	inBubble(t, func(t *testing.T, bb *bubble) {
		l, s := newSemaphore(t, bb.client(), 2)
		ctx := context.Background()
		// A lease that a renewal late by most of a second on a loaded machine
		// does not lose.
		o := Options{TTL: 1500 * time.Millisecond}
		a, err := s.Acquire(ctx, "k", o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Acquire(ctx, "k", o)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * o.TTL)
		for i, lk := range []*Lock{a, b} {
			if err := lk.Err(); err != nil {
				t.Errorf("permit %d after 3 leases: got %v, want held", i, err)
			}
			if d, err := lk.TTL(ctx); err != nil || d <= 0 {
				t.Errorf("permit %d: TTL = %v, %v; want a running lease", i, d, err)
			}
		}
		if _, err := s.Acquire(ctx, "k", o); !errors.Is(err, ErrNotAcquired) {
			t.Errorf("third Acquire with both permits renewed: got %v, want ErrNotAcquired", err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx); err != nil {
			t.Errorf("second Release: got %v, want nil", err)
		}
		c, err := s.Acquire(ctx, "k", o)
		if err != nil {
			t.Fatalf("Acquire after a release: %v", err)
		}
		if c.Fence() <= b.Fence() {
			t.Errorf("fences: got %d after %d, want rising", c.Fence(), b.Fence())
		}
		c.Release(ctx)
		b.Release(ctx)
		_ = l
	})
}

// TestSemaphoreNoticeWakesWaiter holds every permit and queues a waiter
// whose retry strategy and re-check would not look again for an hour: only
// the release notice can wake it, and it must get the permit at once. It
// runs beside other tests: its servers are its own, load only makes
// fewer attempts, and no load delays a notice by the seconds its bound
// allows.
func TestSemaphoreNoticeWakesWaiter(t *testing.T) {
	t.Parallel()
	for _, b := range holdBackends {
		t.Run(b.name, func(t *testing.T) {
			client := b.start(t)
			_, holders := newSemaphore(t, client(), 2)
			cc := client()
			calls := redistest.CountCommands("evalsha", "eval")
			cc.AddHook(calls)
			wl, waiters := newSemaphore(t, cc, 2)
			wl.recheck = time.Hour
			ctx := context.Background()
			o := Options{TTL: time.Minute}
			var held []*Lock
			for range 2 {
				lk, err := holders.Acquire(ctx, "provider", o)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, lk)
			}
			got := make(chan time.Time, 1)
			go func() {
				lk, err := waiters.Acquire(ctx, "provider", Options{TTL: time.Minute, Wait: 30 * time.Second, Retry: LinearBackoff(time.Hour)})
				if err != nil {
					t.Errorf("waiter: %v", err)
					close(got)
					return
				}
				got <- time.Now()
				lk.Release(ctx)
			}()
			awaitHoldWaiters(t, wl, wl.keys.holdKeys("provider", ":sem")[0], 1)
			before := calls.Load()
			time.Sleep(300 * time.Millisecond)
			if n := calls.Load() - before; n > 1 {
				t.Errorf("the waiter made %d attempts while every permit was held, want at most 1", n)
			}
			released := time.Now()
			if err := held[0].Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case at, ok := <-got:
				if ok && at.Sub(released) > 5*time.Second {
					t.Errorf("the waiter got the permit %v after the release, want at once", at.Sub(released))
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the release notice did not wake the waiter")
			}
			held[1].Release(ctx)
		})
	}
}

// TestSemaphoreFairOrder queues waiters from separate Lockers one after
// another behind a full semaphore of 2 permits: the fences they are
// granted (Redis's order of grants) must follow their order of arrival,
// and nothing but the fence counter may be left in Redis at the end.
func TestSemaphoreFairOrder(t *testing.T) {
	srv := redistest.Start(t)
	_, holders := newSemaphore(t, srv.Client(t), 2)
	ctx := context.Background()
	o := Options{Fair: true, Wait: 30 * time.Second}
	var held []*Lock
	for range 2 {
		lk, err := holders.Acquire(ctx, "k", o)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lk)
	}
	const waiters = 6
	fences := make([]int64, waiters)
	var wg sync.WaitGroup
	queue := holders.l.keys.holdKeys("k", ":sem")[2]
	rdb := srv.Client(t)
	for i := range waiters {
		_, s := newSemaphore(t, srv.Client(t), 2)
		wg.Go(func() {
			lk, err := s.Acquire(ctx, "k", o)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			fences[i] = lk.Fence()
			time.Sleep(10 * time.Millisecond)
			lk.Release(ctx)
		})
		for deadline := time.Now().Add(10 * time.Second); rdb.LLen(ctx, queue).Val() != int64(i+1); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued", i)
			}
		}
	}
	for _, lk := range held {
		lk.Release(ctx)
	}
	wg.Wait()
	// Waiters granted at once (two permits freed together) may go in
	// either order, but none is granted before an older waiter that was
	// not yet eligible: waiter i comes at most permits-1 places early.
	for i := range waiters {
		rank := 0
		for j := range waiters {
			if fences[j] < fences[i] {
				rank++
			}
		}
		if rank < i-1 {
			t.Fatalf("fences by arrival: got %v; waiter %d was granted %d places early, want at most 1 (2 permits)", fences, i, i-rank)
		}
	}
	if keys := srv.Keys(t); len(keys) != 1 || keys[0] != "padlock:fence" {
		t.Errorf("keys left in Redis: got %v, want only the fence counter", keys)
	}
}

// TestSemaphoreFairNewcomer checks that a fair Acquire that does not
// wait takes a free permit only if fewer live waiters are queued than
// permits are free: the older waiters are owed them.
func TestSemaphoreFairNewcomer(t *testing.T) {
	srv := redistest.Start(t)
	_, s := newSemaphore(t, srv.Client(t), 1)
	rdb := srv.Client(t)
	ctx := context.Background()
	queue := s.l.keys.holdKeys("k", ":sem")[2]
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// A waiter in another process, first in line for the next 5 seconds.
	rdb.RPush(ctx, queue, fmt.Sprintf("%d:ghost", now.UnixMilli()+5000))
	if _, err := s.Acquire(ctx, "k", Options{Fair: true}); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("1 free permit, 1 waiter queued: got %v, want ErrNotAcquired", err)
	}
	if err := s.SetPermits(2); err != nil {
		t.Fatal(err)
	}
	lk, err := s.Acquire(ctx, "k", Options{Fair: true})
	if err != nil {
		t.Fatalf("2 free permits, 1 waiter queued: got %v, want a permit", err)
	}
	lk.Release(ctx)
}

// TestSemaphoreSetPermits changes N while permits are held: shrinking it
// evicts nobody and lets no one in until fewer than N hold; growing it
// wakes a waiter at once, without a notice or a re-check. It runs in a
// bubble.
func TestSemaphoreSetPermits(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		l, s := newSemaphore(t, b.client(), 3)
		l.recheck = time.Hour
		ctx := context.Background()
		o := Options{TTL: time.Second} // renewed in time on a loaded machine too
		var held []*Lock
		for range 3 {
			lk, err := s.Acquire(ctx, "k", o)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, lk)
		}
		if err := s.SetPermits(1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * o.TTL) // renewals under the smaller bound
		for i, lk := range held {
			if err := lk.Err(); err != nil {
				t.Errorf("holder %d after shrinking: got %v, want still held", i, err)
			}
		}
		for i := range 3 {
			if _, err := s.Acquire(ctx, "k", o); !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("Acquire with %d holders and 1 permit: got %v, want ErrNotAcquired", 3-i, err)
			}
			held[i].Release(ctx)
		}
		// A holder with a long lease, so that only the growth can wake the
		// waiter (not the holder's lease end).
		long := Options{TTL: time.Minute}
		lk, err := s.Acquire(ctx, "k", long)
		if err != nil {
			t.Fatalf("Acquire with no holder and 1 permit: %v", err)
		}
		got := make(chan error, 1)
		go func() {
			lk, err := s.Acquire(ctx, "k", Options{TTL: long.TTL, Wait: 30 * time.Second, Retry: LinearBackoff(time.Hour)})
			if err == nil {
				lk.Release(ctx)
			}
			got <- err
		}()
		awaitHoldWaiters(t, l, l.keys.holdKeys("k", ":sem")[0], 1)
		if err := s.SetPermits(2); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Errorf("waiter after growing: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("growing the bound did not wake the waiter")
		}
		lk.Release(ctx)
		if err := s.SetPermits(0); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetPermits(0): got %v, want ErrInvalid", err)
		}
	})
}

// TestSemaphoreReentrant acquires a permit again under the context of the
// one held: a semaphore of 1 must hand out a reentrant handle at once
// rather than wait for itself, and a mutex on the same key is a
// different thing altogether.
func TestSemaphoreReentrant(t *testing.T) {
	srv := redistest.Start(t)
	l, s := newSemaphore(t, srv.Client(t), 1)
	ctx := context.Background()
	outer, err := s.Acquire(ctx, "k", Options{})
	if err != nil {
		t.Fatal(err)
	}
	gctx := outer.Context(ctx)
	inner, err := s.Acquire(gctx, "k", Options{Wait: time.Second})
	if err != nil {
		t.Fatalf("reentrant Acquire: %v", err)
	}
	if inner.Fence() != outer.Fence() {
		t.Errorf("reentrant fence: got %d, want the outer %d", inner.Fence(), outer.Fence())
	}
	if d, err := outer.TTL(ctx); err != nil || d <= 0 {
		t.Errorf("permit's TTL: got %v, %v; want a running lease", d, err)
	}
	mu, err := l.Acquire(gctx, "k", Options{})
	if err != nil {
		t.Fatalf("mutex on the same key under a permit: %v", err)
	}
	if mu.Fence() == outer.Fence() {
		t.Errorf("the mutex came back as a handle on the permit")
	}
	mu.Release(ctx)
	inner.Release(ctx)
	if err := outer.Err(); err != nil {
		t.Errorf("outer after the inner Release: got %v, want held", err)
	}
	if _, err := outer.Detach(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Detach of a permit: got %v, want ErrInvalid", err)
	}
	outer.Release(ctx)
}

// TestSemaphoreFairChainByNotices runs a fair semaphore under steady
// contention (16 workers, 4 permits, each worker asking again as soon as
// it gives its permit back) with the re-check and the retry backoff an
// hour away, so that only release notices can wake a waiter. Every
// acquisition must be served, and each at the cost of its busy attempt and
// the one its notice triggers: a notice that named the wrong waiter, was
// lost, or woke a waiter that had been dropped from the queue would leave
// someone asleep until its wait ran out, or cost attempts beyond two.
func TestSemaphoreFairChainByNotices(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	calls := redistest.CountCommands("evalsha", "eval")
	rdb.AddHook(calls)
	l, s := newSemaphore(t, rdb, 4)
	l.recheck = time.Hour
	ctx := ctxFor(t)
	o := Options{Fair: true, Wait: 10 * time.Second, Retry: LinearBackoff(time.Hour)}
	// Load the scripts first: an EVALSHA that falls back to EVAL counts
	// twice.
	lk, err := s.Acquire(ctx, "k", o)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	calls.Reset()
	const workers, each = 16, 20
	var (
		wg       sync.WaitGroup
		inside   maxCounter
		acquired atomic.Int64
	)
	for i := range workers {
		wg.Go(func() {
			for range each {
				lk, err := s.Acquire(ctx, "k", o)
				if err != nil {
					t.Errorf("worker %d: got %v, want a permit (a waiter no notice woke?)", i, err)
					return
				}
				acquired.Add(1)
				inside.enter()
				time.Sleep(time.Millisecond)
				inside.leave()
				if err := lk.Release(ctx); err != nil {
					t.Errorf("worker %d: release: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := inside.max.Load(); got > 4 {
		t.Errorf("holders at once: got %d, want at most 4", got)
	}
	n := acquired.Load()
	if n != workers*each {
		t.Fatalf("acquisitions: got %d, want %d", n, workers*each)
	}
	// Scripts run: every release, and the attempts. Waiters that went to
	// sleep before the subscription was confirmed try once more when it
	// is (at most one each), and a few more wake when a waiter
	// named twice (the queue shorter than the free permits, at the end)
	// passes a wake-up on.
	attempts := calls.Load() - n
	if limit := 2*n + 2*workers; attempts > limit {
		t.Errorf("attempts: got %d for %d acquisitions, want at most %d (a busy attempt and a woken one each)", attempts, n, limit)
	}
	t.Logf("%d acquisitions, %d attempts", n, attempts)
}
