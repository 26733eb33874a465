package padlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// multiBackend is a deployment the multi-key tests run on: two Lockers
// (two processes) on it, a client to look at Redis, and keys spread so
// that on Cluster they fall in different slots of different masters.
type multiBackend struct {
	l1, l2 *Locker
	rdb    redis.UniversalClient
	keys   []string // at least 4, in distinct slots on Cluster
}

func multiBackends() []struct {
	name  string
	start func(t *testing.T) multiBackend
} {
	return []struct {
		name  string
		start func(t *testing.T) multiBackend
	}{
		{"single", func(t *testing.T) multiBackend {
			srv := redistest.Start(t)
			l1, l2 := mustNew(t, srv.Client(t)), mustNew(t, srv.Client(t))
			t.Cleanup(func() { l1.Close(); l2.Close() })
			return multiBackend{l1: l1, l2: l2, rdb: srv.Client(t), keys: []string{"acct:1", "acct:2", "acct:3", "acct:4"}}
		}},
		{"cluster", func(t *testing.T) multiBackend {
			c, l1 := startCluster(t)
			l2 := mustNew(t, c.Client(t))
			t.Cleanup(func() { l2.Close() })
			var keys []string
			for _, k := range clusterKeys(l1, 3, 2) {
				keys = append(keys, k...)
			}
			return multiBackend{l1: l1, l2: l2, rdb: c.Client(t), keys: keys}
		}},
	}
}

// multiRuns are the deployments the multi-key tests that need no
// notices run on: one real server, and a 3-master Cluster in memory in a
// bubble, where waiters wake on their timers and leases run on virtual
// time (the real Cluster's own cases are TestAcquireAllWakesOnRelease's
// and TestAcquireAllClusterSameSlotOneCall).
func multiRuns() []struct {
	name string
	run  func(t *testing.T, f func(t *testing.T, b multiBackend))
} {
	return []struct {
		name string
		run  func(t *testing.T, f func(t *testing.T, b multiBackend))
	}{
		{"single", func(t *testing.T, f func(t *testing.T, b multiBackend)) {
			f(t, multiBackends()[0].start(t))
		}},
		multiInMemory()[1],
	}
}

// multiInMemory are both deployments in memory, in a bubble: one server
// and a 3-master Cluster.
func multiInMemory() []struct {
	name string
	run  func(t *testing.T, f func(t *testing.T, b multiBackend))
} {
	return []struct {
		name string
		run  func(t *testing.T, f func(t *testing.T, b multiBackend))
	}{
		{"single", func(t *testing.T, f func(t *testing.T, b multiBackend)) {
			inBubble(t, func(t *testing.T, bb *bubble) {
				l1, l2 := bb.locker(bb.client()), bb.locker(bb.client())
				f(t, multiBackend{l1: l1, l2: l2, rdb: bb.client(), keys: []string{"acct:1", "acct:2", "acct:3", "acct:4"}})
			})
		}},
		{"cluster", func(t *testing.T, f func(t *testing.T, b multiBackend)) {
			inBubble(t, func(t *testing.T, bb *bubble) {
				client := bb.cluster(3)
				l1, l2 := bb.locker(client()), bb.locker(client())
				var keys []string
				for _, k := range clusterKeys(l1, 3, 2) {
					keys = append(keys, k...)
				}
				f(t, multiBackend{l1: l1, l2: l2, rdb: client(), keys: keys})
			})
		}},
	}
}

// heldKeys returns the keys of ks whose lock exists in Redis.
func heldKeys(t *testing.T, l *Locker, rdb redis.UniversalClient, ks []string) []string {
	t.Helper()
	var held []string
	for _, k := range ks {
		n, err := rdb.Exists(context.Background(), l.RedisKey(k)).Result()
		if err != nil {
			t.Fatalf("EXISTS %q: %v", k, err)
		}
		if n == 1 {
			held = append(held, k)
		}
	}
	slices.Sort(held)
	return held
}

func TestAcquireAllTakesEveryKeyWithItsFence(t *testing.T) {
	for _, be := range multiRuns() {
		t.Run(be.name, func(t *testing.T) {
			be.run(t, func(t *testing.T, b multiBackend) {
				ctx := ctxFor(t)
				// Earlier holders of one key: the set's fence must pass theirs.
				before := mustAcquire(t, b.l2, ctx, b.keys[1], Options{})
				beforeFence := before.Fence()
				if err := before.Release(ctx); err != nil {
					t.Fatal(err)
				}
				// Unsorted, with a duplicate.
				asked := []string{b.keys[3], b.keys[1], b.keys[0], b.keys[1]}
				m, err := b.l1.AcquireAll(ctx, asked, Options{})
				if err != nil {
					t.Fatalf("AcquireAll: %v", err)
				}
				want := []string{b.keys[0], b.keys[1], b.keys[3]}
				slices.Sort(want)
				if got := m.Keys(); !slices.Equal(got, want) {
					t.Errorf("Keys() = %q, want %q", got, want)
				}
				fences := m.Fences()
				seen := map[int64]bool{}
				for i, f := range fences {
					if f <= 0 || seen[f] {
						t.Errorf("fence of %q = %d: want positive and distinct, got %v", want[i], f, fences)
					}
					seen[f] = true
				}
				if got := m.Fence(b.keys[1]); got <= beforeFence {
					t.Errorf("Fence(%q) = %d, want > %d (the earlier holder's)", b.keys[1], got, beforeFence)
				}
				if got := heldKeys(t, b.l1, b.rdb, b.keys); !slices.Equal(got, want) {
					t.Errorf("keys held in Redis = %q, want %q", got, want)
				}
				if m.Err() != nil {
					t.Errorf("Err() = %v while held, want nil", m.Err())
				}
				if err := m.Release(ctx); err != nil {
					t.Fatalf("Release: %v", err)
				}
				if got := heldKeys(t, b.l1, b.rdb, b.keys); len(got) != 0 {
					t.Errorf("keys held after Release = %q, want none", got)
				}
				if !errors.Is(m.Err(), ErrReleased) {
					t.Errorf("Err() after Release = %v, want ErrReleased", m.Err())
				}
				if err := m.Release(ctx); err != nil {
					t.Errorf("second Release = %v, want nil", err)
				}
				// And a later holder of a key passes the set's fence.
				after := mustAcquire(t, b.l2, ctx, b.keys[3], Options{})
				defer after.Release(ctx)
				if after.Fence() <= m.Fence(b.keys[3]) {
					t.Errorf("later fence %d, want > the set's %d", after.Fence(), m.Fence(b.keys[3]))
				}
			})
		})
	}
}

// A busy key anywhere in the set fails the whole attempt, and the keys
// taken before it (on Cluster: the slots before the busy one) are given
// back: nothing of the set is left in Redis. It runs in a bubble.
func TestAcquireAllBusyKeyLeavesNoKeyBehind(t *testing.T) {
	for _, be := range multiInMemory() {
		t.Run(be.name, func(t *testing.T) {
			be.run(t, func(t *testing.T, b multiBackend) {
				ctx := ctxFor(t)
				set := slices.Clone(b.keys)
				// The set's last key, taken last: every other key was taken by
				// the time the attempt finds it busy.
				m0, err := b.l1.AcquireAll(ctx, set, Options{})
				if err != nil {
					t.Fatal(err)
				}
				m0.Release(ctx)
				last := m0.keys[m0.groups[len(m0.groups)-1][0]]
				holder := mustAcquire(t, b.l2, ctx, last, Options{})
				defer holder.Release(ctx)

				m, err := b.l1.AcquireAll(ctx, set, Options{Wait: 300 * time.Millisecond})
				if !errors.Is(err, ErrNotAcquired) {
					t.Fatalf("AcquireAll with %q held = %v, %v; want ErrNotAcquired", last, m, err)
				}
				var na *NotAcquiredError
				if errors.As(err, &na) && na.Key != last {
					t.Errorf("error names key %q, want the busy %q", na.Key, last)
				}
				if na.RetryAfter <= 0 {
					t.Errorf("RetryAfter = %v, want the holder's lease", na.RetryAfter)
				}
				if got := heldKeys(t, b.l1, b.rdb, set); !slices.Equal(got, []string{last}) {
					t.Errorf("keys held in Redis = %q, want only the holder's %q", got, []string{last})
				}
			})
		})
	}
}

// Many callers listing the same keys in opposite orders, through two
// Lockers: every call gets its set in the end (no deadlock), and no two
// sets are held at once.
func TestAcquireAllOppositeOrdersNoDeadlock(t *testing.T) {
	for _, be := range multiRuns() {
		t.Run(be.name, func(t *testing.T) {
			be.run(t, func(t *testing.T, b multiBackend) {
				ctx := ctxFor(t)
				fwd := []string{b.keys[0], b.keys[2], b.keys[3]}
				rev := []string{b.keys[3], b.keys[2], b.keys[0]}
				var (
					inUse  [3]atomic.Int32
					rounds atomic.Int32
					wg     sync.WaitGroup
					errs   = make(chan error, 64)
				)
				for g := range 8 {
					wg.Go(func() {
						l, keys := b.l1, fwd
						if g%2 == 1 {
							l, keys = b.l2, rev
						}
						for range 5 {
							m, err := l.AcquireAll(ctx, keys, Options{Wait: 20 * time.Second})
							if err != nil {
								errs <- fmt.Errorf("AcquireAll(%q): %w", keys, err)
								return
							}
							for i := range inUse {
								if n := inUse[i].Add(1); n != 1 {
									errs <- fmt.Errorf("key %d held by %d sets at once", i, n)
								}
							}
							time.Sleep(time.Millisecond)
							for i := range inUse {
								inUse[i].Add(-1)
							}
							rounds.Add(1)
							if err := m.Release(ctx); err != nil {
								errs <- fmt.Errorf("Release: %w", err)
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
				if got := rounds.Load(); got != 40 {
					t.Errorf("sets held = %d, want 40", got)
				}
			})
		})
	}
}

// On one node the set is taken by one script: an observer reading every
// key at once never sees part of it.
func TestAcquireAllNeverPartlyHeld(t *testing.T) {
	l, _, _ := startLocker(t)
	rdb := l.notifier.client
	ctx := ctxFor(t)
	keys := []string{"x:1", "x:2", "x:3"}
	redisKeys := []string{l.RedisKey("x:1"), l.RedisKey("x:2"), l.RedisKey("x:3")}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var partial atomic.Int32
	var looks atomic.Int32
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			vals, err := rdb.MGet(ctx, redisKeys...).Result()
			if err != nil {
				continue
			}
			looks.Add(1)
			n := 0
			for _, v := range vals {
				if v != nil {
					n++
				}
			}
			if n != 0 && n != len(vals) {
				partial.Add(1)
			}
		}
	})
	for range 200 {
		m, err := l.AcquireAll(ctx, keys, Options{Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if partial.Load() != 0 {
		t.Errorf("the observer saw the set partly held %d times in %d looks, want never", partial.Load(), looks.Load())
	}
}

// A waiting AcquireAll wakes on the busy key's release notice, not on a
// timer: with the re-check and the retry backoff set far beyond the test,
// it still gets the set soon after the holder lets go. It runs beside
// other tests: its servers are its own, and no load delays a notice by
// the seconds its bound allows.
func TestAcquireAllWakesOnRelease(t *testing.T) {
	t.Parallel()
	for _, be := range multiBackends() {
		t.Run(be.name, func(t *testing.T) {
			b := be.start(t)
			b.l1.recheck = time.Hour
			ctx := ctxFor(t)
			holder := mustAcquire(t, b.l2, ctx, b.keys[2], Options{TTL: time.Minute})
			got := make(chan error, 1)
			go func() {
				m, err := b.l1.AcquireAll(ctx, b.keys, Options{Wait: 25 * time.Second, Retry: LinearBackoff(time.Hour)})
				if err == nil {
					err = m.Release(ctx)
				}
				got <- err
			}()
			awaitWaiters(t, b.l1, b.keys[2], "a live subscription", func(kw *keyWaiters) bool { return kw != nil && kw.live && len(kw.waiters) > 0 })
			time.Sleep(50 * time.Millisecond) // the attempt marked the key
			released := time.Now()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("AcquireAll: %v", err)
				}
				if d := time.Since(released); d > 10*time.Second {
					t.Errorf("got the set %v after the release, want a wake-up by notice", d)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("AcquireAll still waits 20s after the busy key was released")
			}
		})
	}
}

// One key lost ends the whole set at once; Release then gives back the
// others and reports the loss.
func TestAcquireAllOneKeyLostEndsTheSet(t *testing.T) {
	for _, be := range multiRuns() {
		t.Run(be.name, func(t *testing.T) {
			be.run(t, func(t *testing.T, b multiBackend) {
				ctx := ctxFor(t)
				m, err := b.l1.AcquireAll(ctx, b.keys, Options{TTL: 600 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				guarded := m.Context(ctx)
				// Someone deletes one key behind the set's back.
				if err := b.rdb.Del(ctx, b.l1.RedisKey(b.keys[1])).Err(); err != nil {
					t.Fatal(err)
				}
				select {
				case <-m.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("Done still open 10s after a key was lost")
				}
				if !errors.Is(m.Err(), ErrLockLost) {
					t.Errorf("Err() = %v, want ErrLockLost", m.Err())
				}
				if !errors.Is(context.Cause(guarded), ErrLockLost) {
					t.Errorf("the guarded context's cause = %v, want ErrLockLost", context.Cause(guarded))
				}
				if err := m.Release(ctx); !errors.Is(err, ErrNotHeld) {
					t.Errorf("Release = %v, want ErrNotHeld", err)
				}
				if got := heldKeys(t, b.l1, b.rdb, b.keys); len(got) != 0 {
					t.Errorf("keys held after Release = %q, want none", got)
				}
			})
		})
	}
}

// Acquire of one of the keys with the set's context is reentrant.
func TestAcquireAllContextIsReentrant(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := ctxFor(t)
	m, err := l.AcquireAll(ctx, []string{"r:1", "r:2"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	gctx := m.Context(ctx)
	inner, err := l.Acquire(gctx, "r:1", Options{})
	if err != nil {
		t.Fatalf("Acquire inside the set's context: %v", err)
	}
	if inner.Fence() != m.Fence("r:1") {
		t.Errorf("inner fence %d, want the set's %d", inner.Fence(), m.Fence("r:1"))
	}
	inner.Release(ctx)
	// The set again, from inside: refused at once, not waited for.
	if again, err := l.AcquireAll(gctx, []string{"r:2", "r:3"}, Options{Wait: time.Minute}); !errors.Is(err, ErrInvalid) {
		t.Errorf("AcquireAll inside the set's context = %v, %v; want ErrInvalid", again, err)
	}
	if m.Err() != nil {
		t.Errorf("Err() = %v after the inner handle's Release, want nil", m.Err())
	}
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if gctx.Err() == nil || !errors.Is(context.Cause(gctx), ErrReleased) {
		t.Errorf("guarded context cause = %v, want ErrReleased", context.Cause(gctx))
	}
}

func TestAcquireAllInvalid(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := ctxFor(t)
	for _, tc := range []struct {
		name string
		keys []string
		o    Options
	}{
		{"no keys", nil, Options{}},
		{"empty key", []string{"a", ""}, Options{}},
		{"fair", []string{"a"}, Options{Fair: true}},
		{"negative wait", []string{"a"}, Options{Wait: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := l.AcquireAll(ctx, tc.keys, tc.o); !errors.Is(err, ErrInvalid) {
				t.Errorf("AcquireAll = %v, %v; want ErrInvalid", m, err)
			}
		})
	}
	l.Close()
	if _, err := l.AcquireAll(ctx, []string{"a"}, Options{}); !errors.Is(err, ErrClosed) {
		t.Errorf("AcquireAll after Close = %v, want ErrClosed", err)
	}
}

func BenchmarkAcquireAll(b *testing.B) {
	for _, n := range []int{2, 5} {
		b.Run(fmt.Sprintf("%dkeys", n), func(b *testing.B) {
			srv := redistest.Start(b)
			l := mustNew(b, srv.Client(b))
			defer l.Close()
			ctx := context.Background()
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("bench:%d", i)
			}
			b.ReportAllocs()
			for b.Loop() {
				m, err := l.AcquireAll(ctx, keys, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
