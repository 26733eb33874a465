package padlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// handedOn reports whether lk was handed over by a holder of its Locker:
// it goes on with the lease of the lock it was handed by.
func handedOn(lk *Lock) bool { return lk.lease != &lk.own }

// TestFairHandOffWithinLocker releases a fair lock whose queue holds
// waiters of the same Locker only: each release must hand the lock to the
// next of them in arrival order, in one round trip, with a fence above
// the last, and take it off the queue.
func TestFairHandOffWithinLocker(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	sent := redistest.CountRoundTrips()
	rdb.AddHook(sent)
	l := mustNew(t, rdb)
	defer l.Close()
	l.recheck = time.Minute // wake-ups come from hand-offs alone
	ctx := ctxFor(t)
	key := testKey(t)
	const waiters = 4
	o := Options{Fair: true, Wait: 30 * time.Second}

	holder := mustAcquire(t, l, ctx, key, o)
	got := queueWaiters(t, l, key, waiters, o)
	lockKey, _, queue := l.keys.lockKeys(key)
	check := srv.Client(t)
	if n := check.LLen(ctx, queue).Val(); n != waiters {
		t.Fatalf("queue holds %d waiters, want %d", n, waiters)
	}
	if err := plainScripts.handoverFair.Load(ctx, rdb).Err(); err != nil { // one EVALSHA per hand-off
		t.Fatal(err)
	}
	prev := holder
	for i := range waiters {
		before := sent.Load()
		if err := prev.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := sent.Load() - before; n != 1 {
			t.Fatalf("hand-off %d: %d round trips, want 1", i, n)
		}
		if !errors.Is(prev.Err(), ErrReleased) {
			t.Fatalf("released handle: Err() = %v, want ErrReleased", prev.Err())
		}
		h := <-got
		switch {
		case h.lk == nil:
			t.Fatalf("hand-off %d: the waiter got no lock", i)
		case h.place != i:
			t.Fatalf("hand-off %d went to the waiter queued %d-th, want arrival order", i, h.place)
		case !handedOn(h.lk):
			t.Fatalf("hand-off %d: the waiter took the lock from Redis, want it handed on", i)
		case h.lk.Fence() <= prev.Fence():
			t.Fatalf("handed fence %d after %d, want a higher one", h.lk.Fence(), prev.Fence())
		}
		if v, err := check.Get(ctx, lockKey).Result(); err != nil || tokenOf(v) != h.lk.Token() {
			t.Fatalf("lock key holds %q (%v), want the handed lock's token", v, err)
		}
		if n := check.LLen(ctx, queue).Val(); n != int64(waiters-1-i) {
			t.Fatalf("after hand-off %d the queue holds %d waiters, want %d", i, n, waiters-1-i)
		}
		prev = h.lk
	}
	// The handed lock is a lock like any other.
	if err := prev.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := prev.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := check.Exists(ctx, lockKey, queue).Val(); n != 0 {
		t.Fatalf("%d of the lock key and its queue left after the last release, want none", n)
	}
}

// TestFairHandOffKeepsOrderAcrossLockers queues a waiter of another
// Locker before a waiter of the holder's own: the release must not hand
// the lock to the local one, which would jump the queue, but let the other
// Locker's waiter have it first. When the local waiter is at the head, it
// is handed the lock, ahead of a waiter of the other Locker queued later.
func TestFairHandOffKeepsOrderAcrossLockers(t *testing.T) {
	l, other, srv := fairPair(t)
	ctx := ctxFor(t)
	key := testKey(t)
	o := Options{Fair: true, Wait: 30 * time.Second}
	_, _, queue := l.keys.lockKeys(key)
	check := srv.Client(t)

	var (
		mu    sync.Mutex
		order []string
	)
	wait := func(name string, in *Locker) <-chan *Lock {
		got := make(chan *Lock, 1)
		go func() {
			lk, err := in.Acquire(ctx, key, o)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			got <- lk
		}()
		return got
	}
	queued := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); check.LLen(ctx, queue).Val() != int64(n); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("queue %v, want %d waiters", check.LRange(ctx, queue, 0, -1).Val(), n)
			}
		}
	}

	holder := mustAcquire(t, l, ctx, key, o)
	elsewhere := wait("other Locker's waiter", other)
	queued(1)
	waitParked(t, other, key, 1)
	here := wait("local waiter", l)
	queued(2)
	waitParked(t, l, key, 1)

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var first *Lock
	select {
	case lk := <-here:
		lk.Release(ctx)
		t.Fatalf("the local waiter, queued second, got the lock first (handed on: %v)", handedOn(lk))
	case first = <-elsewhere:
	}
	if first == nil {
		t.FailNow()
	}
	if handedOn(first) {
		t.Fatal("the other Locker's waiter was handed the lock: hand-offs stay within a Locker")
	}
	// The local waiter is still queued, now at the head.
	if entries := check.LRange(ctx, queue, 0, -1).Val(); len(entries) != 1 {
		t.Fatalf("queue once the other Locker's waiter was served: %v, want the local waiter alone", entries)
	}
	later := wait("other Locker's later waiter", other)
	queued(2)
	waitParked(t, other, key, 1)

	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-here
	if second == nil {
		t.FailNow()
	}
	// Another Locker released it: it came from Redis.
	if handedOn(second) || second.Fence() <= first.Fence() {
		t.Fatalf("local waiter: handed %v, fence %d after %d; want taken from Redis, with a higher fence", handedOn(second), second.Fence(), first.Fence())
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	third := <-later
	if third == nil {
		t.FailNow()
	}
	if err := third.Release(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"other Locker's waiter", "local waiter", "other Locker's later waiter"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("served in order %q, want %q (arrival order)", order, want)
	}
}

// TestFairHandOffLocalHeadFirst queues a local waiter before a waiter of
// another Locker: the release hands the lock on to the local one, the
// head of the queue, and the other Locker's waiter goes next.
func TestFairHandOffLocalHeadFirst(t *testing.T) {
	l, other, _ := fairPair(t)
	ctx := ctxFor(t)
	key := testKey(t)
	o := Options{Fair: true, Wait: 30 * time.Second}

	holder := mustAcquire(t, l, ctx, key, o)
	here := queueWaiters(t, l, key, 1, o)
	elsewhere := make(chan *Lock, 1)
	go func() {
		lk, err := other.Acquire(ctx, key, o)
		if err != nil {
			t.Errorf("other Locker's waiter: %v", err)
		}
		elsewhere <- lk
	}()
	waitParked(t, other, key, 1)

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-here
	if h.lk == nil {
		t.FailNow()
	}
	if !handedOn(h.lk) {
		t.Fatal("the local waiter at the head of the queue took the lock from Redis, want it handed on")
	}
	select {
	case lk := <-elsewhere:
		t.Fatalf("the other Locker's waiter, queued later, got the lock (%v) while the local one holds it", lk != nil)
	default:
	}
	if err := h.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if lk := <-elsewhere; lk == nil {
		t.Fatal("the other Locker's waiter got no lock")
	} else if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// loseFairHandOff is a go-redis hook that loses the reply of the first fair
// hand-off (handover_fair.lua): after the server ran it (ran), or before
// it was sent. It records the next grant's token.
type loseFairHandOff struct {
	ran bool

	mu   sync.Mutex
	lost bool
	next string
}

func (h *loseFairHandOff) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loseFairHandOff) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *loseFairHandOff) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if cmd.Name() != "evalsha" || len(args) < 8 || fmt.Sprint(args[1]) != plainScripts.handoverFair.Hash() {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		first := !h.lost
		if first {
			h.lost, h.next = true, fmt.Sprint(args[7])
		}
		h.mu.Unlock()
		if !first {
			return next(ctx, cmd)
		}
		if h.ran {
			if err := next(ctx, cmd); err != nil {
				return err
			}
		}
		lostErr := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		cmd.SetErr(lostErr)
		return lostErr
	}
}

// TestFairHandOffReplyLost loses the reply of a fair hand-off, after
// Redis ran it or before it got there: the holder must not be told it let
// go cleanly when it may not have, the lock must not end up with two
// holders (the next grant's token, let go by the clean-up, never holds it
// beside the waiter's), and the waiter, taken off the queue or not, must
// still get the lock.
func TestFairHandOffReplyLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		ran  bool
	}{
		{"after it ran", true},
		{"before it was sent", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			lose := &loseFairHandOff{ran: tc.ran}
			rdb.AddHook(lose)
			l := mustNew(t, rdb)
			defer l.Close()
			ctx := ctxFor(t)
			key := testKey(t)
			o := Options{Fair: true, Wait: 30 * time.Second}
			lockKey, _, queue := l.keys.lockKeys(key)
			check := srv.Client(t)

			if err := plainScripts.handoverFair.Load(ctx, rdb).Err(); err != nil { // the hook watches EVALSHA
				t.Fatal(err)
			}
			holder := mustAcquire(t, l, ctx, key, o)
			got := queueWaiters(t, l, key, 1, o)
			err := holder.Release(ctx)
			lose.mu.Lock()
			next := lose.next
			lose.mu.Unlock()
			if next == "" {
				t.Fatal("the release sent no fair hand-off")
			}
			switch {
			case tc.ran && !errors.Is(err, ErrUnavailable):
				t.Fatalf("Release whose hand-off ran but whose reply was lost: got %v, want ErrUnavailable", err)
			case !tc.ran && err != nil:
				t.Fatalf("Release whose hand-off never reached Redis: got %v, want nil (it let go itself)", err)
			}
			if holder.Err() == nil {
				t.Fatal("the releasing handle still reports the lock held")
			}
			h := <-got
			if h.lk == nil {
				t.FailNow()
			}
			if handedOn(h.lk) {
				t.Fatal("the waiter was handed a lock whose hand-off was not confirmed")
			}
			v, err := check.Get(ctx, lockKey).Result()
			if err != nil || tokenOf(v) != h.lk.Token() {
				t.Fatalf("lock key holds %q (%v), want the waiter's token %q", v, err, h.lk.Token())
			}
			if h.lk.Token() == next {
				t.Fatalf("the waiter holds the lost hand-off's token %q: every grant is its own", next)
			}
			if err := h.lk.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if n := check.Exists(ctx, lockKey, queue).Val(); n != 0 {
				t.Fatalf("%d of the lock key and its queue left after the last release, want none", n)
			}
		})
	}
}

// fairPair returns two Lockers on one fresh server, closed when t ends,
// and the server.
func fairPair(t *testing.T) (l, other *Locker, srv *redistest.Server) {
	l, srv, _ = startLocker(t)
	other = mustNew(t, srv.Client(t))
	t.Cleanup(func() { _ = other.Close() })
	return l, other, srv
}
