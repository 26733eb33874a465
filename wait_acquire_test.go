package padlock_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMutualExclusionCounter(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)

	const workers, rounds = 100, 3
	counter := 0 // deliberately not atomic: only the lock protects it
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for range workers {
		wg.Go(func() {
			for range rounds {
				lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 20 * time.Second})
				if err != nil {
					errs <- err
					return
				}
				v := counter
				time.Sleep(time.Microsecond) // widen the race window
				counter = v + 1
				if err := lk.Release(ctx); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	if counter != workers*rounds {
		t.Fatalf("counter = %d, want %d", counter, workers*rounds)
	}
}

func TestExpiryFreesCrashedHolder(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	// A holder that "crashes": it never releases and nothing renews it.
	crashed := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 200 * time.Millisecond, NoRenew: true})
	_ = crashed

	if _, err := l.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("before expiry: got %v, want ErrNotAcquired", err)
	}
	start := time.Now()
	lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	defer lk.Release(ctx)
	// The waiter sleeps until the lease ends, not for its whole budget.
	if waited := time.Since(start); waited > 4*time.Second {
		t.Fatalf("waited %v for a 200ms lease", waited)
	}
	if lk.Fence() <= crashed.Fence() {
		t.Fatalf("fence %d after expiry, want > the crashed holder's %d", lk.Fence(), crashed.Fence())
	}
}

func TestWaitSucceedsWhenHolderReleases(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	holder := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 30 * time.Second})

	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		released <- time.Now()
		holder.Release(ctx)
	}()
	lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("waiting Acquire: %v", err)
	}
	defer lk.Release(ctx)
	at := <-released
	if lk.Fence() <= holder.Fence() {
		t.Fatalf("fence %d, want > holder's %d", lk.Fence(), holder.Fence())
	}
	// The waiter must not have slept through the holder's 30s lease.
	if late := time.Since(at); late > 5*time.Second {
		t.Fatalf("acquired %v after the release", late)
	}
}

func TestWaitGivesUpOnTime(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	holder := mustAcquire(t, l, ctx, key, padlock.Options{})
	defer holder.Release(ctx)

	const wait = 300 * time.Millisecond
	start := time.Now()
	_, err := l.Acquire(ctx, key, padlock.Options{Wait: wait})
	took := time.Since(start)
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("got %v, want ErrNotAcquired", err)
	}
	var na *padlock.NotAcquiredError
	if errors.As(err, &na); na.Attempts < 2 {
		t.Fatalf("%d attempts in %v of waiting, want retries", na.Attempts, wait)
	}
	// Lower bound only: the wait must be used. (No upper bound tighter than
	// a generous one: shared machines stall.)
	if took < wait || took > wait+5*time.Second {
		t.Fatalf("gave up after %v, want about %v", took, wait)
	}
}

func TestContextCancelEndsWait(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	holder := mustAcquire(t, l, ctx, key, padlock.Options{})
	defer holder.Release(ctx)

	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			time.AfterFunc(100*time.Millisecond, cancel)
			return c, cancel
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"already canceled", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return c, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			_, err := l.Acquire(c, key, padlock.Options{Wait: time.Minute})
			if !errors.Is(err, padlock.ErrNotAcquired) || !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want ErrNotAcquired and %v", err, tc.want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("returned %v after the context ended", took)
			}
		})
	}
}

// TestOneOfManyTakesIt: a thousand callers, arriving at random within 50ms,
// each try once for a key nobody releases: exactly one gets it.
// A check of the peers' own suites (bsm/redislock, go-redsync/redsync).
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

// delayProxy forwards TCP connections to target, holding back everything
// the server sends by delay: a slow network, or a server stalled after it
// ran the command. It stops when t ends.
func delayProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			track(client)
			track(server)
			wg.Go(func() { _, _ = io.Copy(server, client) })
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if n > 0 {
						time.Sleep(delay)
						if _, werr := client.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestLateGrantIsNotALock: a grant whose reply arrives after the lease's
// trusted part ran out must not be handed to the caller, who would then
// work under a lock another owner may already hold.
// Regression: Acquire returned a lock whose lease had already ended.
func TestLateGrantIsNotALock(t *testing.T) {
	// A server and a slow link of its own; a loaded machine only makes
	// the first grant later still, and the second lease outlasts the
	// delay many times.
	t.Parallel()
	srv := redistest.Start(t)
	direct := srv.Client(t)
	slow := redis.NewClient(&redis.Options{Addr: delayProxy(t, srv.Addr(), 300*time.Millisecond), ReadTimeout: 5 * time.Second, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { slow.Close() })
	l := padlock.MustNew(t, slow)
	t.Cleanup(func() { l.Close() })
	ctx := ctxFor(t)
	key := testKey(t)

	lk, err := l.Acquire(ctx, key, padlock.Options{TTL: 200 * time.Millisecond})
	if lk != nil || !errors.Is(err, padlock.ErrUnavailable) || errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("Acquire whose grant came back after its 200ms lease: got %v, %v; want ErrUnavailable only", lk, err)
	}
	// The grant was undone, so the key is free for others at once, not
	// only when the lease runs out.
	if n := direct.Exists(ctx, "padlock:{"+key+"}").Val(); n != 0 {
		t.Fatalf("the late grant was left in Redis")
	}

	// With a lease that outlasts the delay, the same slow path works.
	lk, err = l.Acquire(ctx, key, padlock.Options{TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("Acquire with a 5s lease over the slow link: %v", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

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
		wl := padlock.MustNew(t, srv.Client(t))
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
	// On virtual time: the queued waiter's 2 seconds cost nothing.
	inBubble(t, func(t *testing.T, b *bubble) {
		l, rdb := b.locker()
		ctx := context.Background()
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
		if waited := time.Since(now); waited < 2*time.Second {
			t.Errorf("the key was taken %v after the ghost queued, before its 2s wait ran out", waited)
		}
		lk.Release(ctx)
	})
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
