package padlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// rwCounter tracks who is inside a read-write lock and records any moment
// a writer shared it.
type rwCounter struct {
	readers, writers, maxReaders atomic.Int64
	overlaps                     atomic.Int64
}

func (c *rwCounter) read(d time.Duration) {
	n := c.readers.Add(1)
	for m := c.maxReaders.Load(); n > m && !c.maxReaders.CompareAndSwap(m, n); m = c.maxReaders.Load() {
	}
	if c.writers.Load() != 0 {
		c.overlaps.Add(1)
	}
	time.Sleep(d)
	c.readers.Add(-1)
}

func (c *rwCounter) write(d time.Duration) {
	if c.writers.Add(1) != 1 || c.readers.Load() != 0 {
		c.overlaps.Add(1)
	}
	time.Sleep(d)
	c.writers.Add(-1)
}

// TestRWLockExclusion races readers and writers from three Lockers: no
// writer ever shares the lock, readers do share it, and everyone gets in.
// It runs in a bubble (the in-memory Cluster wakes waiters by their
// timers).
func TestRWLockExclusion(t *testing.T) {
	for _, be := range bubbleBackends {
		t.Run(be.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, b *bubble) {
				client := be.start(b)
				var lockers []*Locker
				for range 3 {
					l := mustNew(t, client())
					t.Cleanup(func() { l.Close() })
					lockers = append(lockers, l)
				}
				ctx := context.Background()
				var c rwCounter
				var wg sync.WaitGroup
				o := Options{Wait: 60 * time.Second}
				for w := range 16 {
					wg.Go(func() {
						l := lockers[w%len(lockers)]
						for r := range 4 {
							write := (w+r)%4 == 0
							var lk *Lock
							var err error
							if write {
								lk, err = l.AcquireWrite(ctx, "doc", o)
							} else {
								lk, err = l.AcquireRead(ctx, "doc", o)
							}
							if err != nil {
								t.Errorf("worker %d (write %v): %v", w, write, err)
								return
							}
							if write {
								c.write(5 * time.Millisecond)
							} else {
								c.read(5 * time.Millisecond)
							}
							if err := lk.Release(ctx); err != nil {
								t.Errorf("worker %d: Release: %v", w, err)
							}
						}
					})
				}
				wg.Wait()
				if n := c.overlaps.Load(); n != 0 {
					t.Errorf("a writer shared the lock %d times, want never", n)
				}
				if m := c.maxReaders.Load(); m < 2 {
					t.Errorf("most readers at once: got %d, want readers sharing (at least 2)", m)
				}
			})
		})
	}
}

// TestRWLockWriterNotStarved keeps a stream of overlapping readers going
// (the lock is never free of readers) and starts a writer: it must get
// in, well within its wait, because waiting it keeps new readers out.
func TestRWLockWriterNotStarved(t *testing.T) {
	srv := redistest.Start(t)
	readers := mustNew(t, srv.Client(t))
	defer readers.Close()
	writer := mustNew(t, srv.Client(t))
	defer writer.Close()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 10 * time.Millisecond) // staggered: always one inside
			for ctx.Err() == nil {
				lk, err := readers.AcquireRead(ctx, "doc", Options{Wait: 30 * time.Second})
				if err != nil {
					continue
				}
				time.Sleep(40 * time.Millisecond)
				lk.Release(context.Background())
			}
		})
	}
	defer func() { stop(); wg.Wait() }()
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	lk, err := writer.AcquireWrite(context.Background(), "doc", Options{Wait: 8 * time.Second})
	if err != nil {
		t.Fatalf("writer behind a stream of readers: got %v, want the lock", err)
	}
	t.Logf("the writer got in after %v", time.Since(began))
	lk.Release(context.Background())
}

// TestRWLockReentrant checks the holds a guarded context carries: a
// reader or writer reading again, a writer writing again, get handles at
// once (even with a writer waiting); a reader cannot become the writer.
func TestRWLockReentrant(t *testing.T) {
	srv := redistest.Start(t)
	l := mustNew(t, srv.Client(t))
	defer l.Close()
	other := mustNew(t, srv.Client(t))
	defer other.Close()
	ctx := context.Background()

	r, err := l.AcquireRead(ctx, "doc", Options{})
	if err != nil {
		t.Fatal(err)
	}
	rctx := r.Context(ctx)
	// A writer waits now: a new reader would wait behind it.
	wgot := make(chan error, 1)
	go func() {
		lk, err := other.AcquireWrite(ctx, "doc", Options{Wait: 20 * time.Second})
		if err == nil {
			lk.Release(ctx)
		}
		wgot <- err
	}()
	queue := l.keys.holdKeys("doc", ":rw")[2]
	rdb := srv.Client(t)
	for deadline := time.Now().Add(10 * time.Second); rdb.LLen(ctx, queue).Val() != 1; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer never queued")
		}
	}
	if _, err := l.AcquireRead(ctx, "doc", Options{}); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a new reader with a writer waiting: got %v, want ErrNotAcquired", err)
	}
	inner, err := l.AcquireRead(rctx, "doc", Options{})
	if err != nil {
		t.Fatalf("reentrant read with a writer waiting: %v", err)
	}
	if _, err := l.AcquireWrite(rctx, "doc", Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("write under a read hold: got %v, want ErrInvalid", err)
	}
	inner.Release(ctx)
	if err := r.Err(); err != nil {
		t.Fatalf("outer read hold after the inner Release: got %v, want held", err)
	}
	r.Release(ctx)
	if err := <-wgot; err != nil {
		t.Fatalf("the writer after the reader left: %v", err)
	}

	w, err := l.AcquireWrite(ctx, "doc", Options{})
	if err != nil {
		t.Fatal(err)
	}
	wctx := w.Context(ctx)
	for _, write := range []bool{true, false} {
		var lk *Lock
		if write {
			lk, err = l.AcquireWrite(wctx, "doc", Options{})
		} else {
			lk, err = l.AcquireRead(wctx, "doc", Options{})
		}
		if err != nil {
			t.Fatalf("reentrant (write %v) under the write hold: %v", write, err)
		}
		if lk.Fence() != w.Fence() {
			t.Errorf("reentrant fence: got %d, want the writer's %d", lk.Fence(), w.Fence())
		}
		lk.Release(ctx)
	}
	if _, err := other.AcquireRead(ctx, "doc", Options{}); !errors.Is(err, ErrNotAcquired) {
		t.Errorf("another reader while the writer holds: got %v, want ErrNotAcquired", err)
	}
	w.Release(ctx)
}

// TestRWLockNoticesWake checks that waiters wake on notices alone (their
// retry and re-check would not look for an hour): a writer when the last
// reader leaves, and every waiting reader when the writer leaves. It runs
// beside other tests: its servers are its own, and no load delays a
// notice by the seconds its bounds allow.
func TestRWLockNoticesWake(t *testing.T) {
	t.Parallel()
	for _, b := range holdBackends {
		t.Run(b.name, func(t *testing.T) {
			client := b.start(t)
			holders := mustNew(t, client())
			defer holders.Close()
			l := mustNew(t, client())
			defer l.Close()
			l.recheck = time.Hour
			ctx := context.Background()
			slow := Options{TTL: time.Minute, Wait: 30 * time.Second, Retry: LinearBackoff(time.Hour)}
			channel := l.keys.holdKeys("doc", ":rw")[0]

			r, err := holders.AcquireRead(ctx, "doc", Options{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			wgot := make(chan *Lock, 1)
			go func() {
				lk, err := l.AcquireWrite(ctx, "doc", slow)
				if err != nil {
					t.Errorf("writer: %v", err)
				}
				wgot <- lk
			}()
			awaitHoldWaiters(t, l, channel, 1)
			r.Release(ctx)
			var w *Lock
			select {
			case w = <-wgot:
			case <-time.After(10 * time.Second):
				t.Fatal("the last reader's release did not wake the writer")
			}
			if w == nil {
				return
			}
			const readers = 3
			rgot := make(chan error, readers)
			for range readers {
				go func() {
					lk, err := l.AcquireRead(ctx, "doc", slow)
					if err == nil {
						defer lk.Release(ctx)
						time.Sleep(100 * time.Millisecond) // hold together
					}
					rgot <- err
				}()
			}
			awaitHoldWaiters(t, l, channel, readers)
			w.Release(ctx)
			for i := range readers {
				select {
				case err := <-rgot:
					if err != nil {
						t.Errorf("reader %d: %v", i, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("the writer's release woke %d of %d readers", i, readers)
				}
			}
		})
	}
}

// TestRWLockLostAndFenced pauses the server under a writer and a reader
// of two keys: both lost signals fire before the leases could end. And
// each writer's fence is above every earlier holder's. It runs in a
// bubble, where the pause holds every command for a minute.
func TestRWLockLostAndFenced(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		l := b.locker(b.client())
		ctx := context.Background()
		var last int64
		for i := range 3 {
			r, err := l.AcquireRead(ctx, "f", Options{})
			if err != nil {
				t.Fatal(err)
			}
			r.Release(ctx)
			w, err := l.AcquireWrite(ctx, "f", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if w.Fence() <= r.Fence() || w.Fence() <= last {
				t.Errorf("round %d: writer fence %d after reader %d and writer %d, want greater", i, w.Fence(), r.Fence(), last)
			}
			last = w.Fence()
			w.Release(ctx)
		}

		const ttl = 900 * time.Millisecond
		sent := time.Now()
		w, err := l.AcquireWrite(ctx, "w", Options{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.AcquireRead(ctx, "r", Options{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		b.srv.Pause(time.Minute)
		for name, lk := range map[string]*Lock{"writer": w, "reader": r} {
			// The signal is due at ValidUntil, before the lease can end in
			// Redis; Err says lost from then on, however late a loaded
			// machine lets the watchdog run.
			until := lk.ValidUntil()
			if !until.Before(sent.Add(ttl)) {
				t.Errorf("%s: ValidUntil %v after the acquire, want before the lease (%v) ends", name, until.Sub(sent), ttl)
			}
			time.Sleep(time.Until(until))
			if err := lk.Err(); !errors.Is(err, ErrLockLost) {
				t.Errorf("%s: Err at ValidUntil: got %v, want ErrLockLost", name, err)
			}
			select {
			case <-lk.Done():
				if !errors.Is(lk.Err(), ErrLockLost) {
					t.Errorf("%s: Err %v, want ErrLockLost", name, lk.Err())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: Done never closed under a paused server", name)
			}
		}
	})
}

// TestRWLockCrashedHoldersFree closes Lockers holding a read and, on
// another key, a write hold without releasing: each frees with its lease.
// It runs in a bubble.
func TestRWLockCrashedHoldersFree(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		crashed := b.locker(b.client())
		l := b.locker(b.client())
		ctx := context.Background()
		o := Options{TTL: 500 * time.Millisecond}
		if _, err := crashed.AcquireRead(ctx, "a", o); err != nil {
			t.Fatal(err)
		}
		if _, err := crashed.AcquireWrite(ctx, "b", o); err != nil {
			t.Fatal(err)
		}
		crashed.Close()
		for _, key := range []string{"a", "b"} {
			if _, err := l.AcquireWrite(ctx, key, Options{}); !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("%s: while the crashed hold's lease runs: got %v, want ErrNotAcquired", key, err)
			}
		}
		for _, key := range []string{"a", "b"} {
			lk, err := l.AcquireWrite(ctx, key, Options{Wait: 10 * time.Second})
			if err != nil {
				t.Fatalf("%s: after the lease: %v", key, err)
			}
			lk.Release(ctx)
		}
		if keys := b.srv.Keys(); len(keys) != 1 || keys[0] != "padlock:fence" {
			t.Errorf("keys left in Redis: got %v, want only the fence counter", keys)
		}
	})
}
