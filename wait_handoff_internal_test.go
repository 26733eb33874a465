package padlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// TestHandOffWithinLocker releases a lock that waiters of the same Locker
// queue for: each release must hand the lock to the next waiter in arrival
// order, with the next fence, after one round trip that confirms the lock, and the
// key must stay locked in Redis throughout.
func TestHandOffWithinLocker(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	sent := redistest.CountRoundTrips()
	rdb.AddHook(sent)
	l := mustNew(t, rdb)
	defer l.Close()
	ctx := context.Background()
	const key, waiters = "handoff", 5

	// The holder is in another Locker; the first waiter takes the lock
	// from Redis when it lets go, reserving fences for those behind it.
	other := mustNew(t, srv.Client(t))
	defer other.Close()
	holder, err := other.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := queueWaiters(t, l, key, waiters+1, Options{Wait: 30 * time.Second})
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := <-got
	if first.place != 0 {
		t.Fatalf("the waiter queued %d-th got the lock first", first.place)
	}
	lockKey, _, _ := l.keys.lockKeys(key)
	check := srv.Client(t)

	prev := first.lk
	if err := handoverScript.Load(ctx, rdb).Err(); err != nil { // one EVALSHA per hand-off
		t.Fatal(err)
	}
	before := sent.Load()
	for i := 1; i <= waiters; i++ {
		if err := prev.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(prev.Err(), ErrReleased) {
			t.Fatalf("released handle: Err() = %v, want ErrReleased", prev.Err())
		}
		h := <-got
		if h.place != i {
			t.Fatalf("hand-off %d went to the waiter queued %d-th: local waiters must be served in arrival order", i, h.place)
		}
		if h.lk.Fence() != prev.Fence()+1 {
			t.Fatalf("handed fence %d after %d, want the next one", h.lk.Fence(), prev.Fence())
		}
		if h.lk.Err() != nil {
			t.Fatalf("handed lock: Err() = %v", h.lk.Err())
		}
		if v, err := check.Get(ctx, lockKey).Result(); err != nil || tokenOf(v) != h.lk.Token() {
			t.Fatalf("lock key holds %q (%v), want the handed lock's token", v, err)
		}
		prev = h.lk
	}
	// One round trip each: the confirmation that Redis still holds the
	// lock (wait_handoff.go).
	if n := sent.Load() - before; n != waiters {
		t.Fatalf("%d round trips for %d hand-offs, want one each", n, waiters)
	}

	// The handed lock is a lock like any other: Redis knows its token.
	if d, err := prev.TTL(ctx); err != nil || d <= 0 {
		t.Fatalf("TTL of the last handed lock = %v, %v", d, err)
	}
	if err := prev.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := prev.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := check.Exists(ctx, lockKey).Result(); n != 0 {
		t.Fatal("the last release did not delete the key")
	}

	// Fences reserved for hand-offs are never given out again: the next
	// holder, from another Locker, gets a higher one.
	lk, err := other.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(ctx)
	if lk.Fence() <= prev.Fence() {
		t.Fatalf("fence %d after handed fence %d: must be higher", lk.Fence(), prev.Fence())
	}
}

// TestHandOffBlockRunsOut checks that a lock goes back to Redis once the
// fences reserved with it are used up, and the waiter still gets it.
func TestHandOffBlockRunsOut(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := context.Background()
	const key = "block"
	// A single attempt reserves one fence: no hand-off is possible.
	holder, err := l.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := queueWaiters(t, l, key, 1, Options{Wait: 30 * time.Second})
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.lk == nil {
		return
	}
	defer h.lk.Release(ctx)
	if h.lk.lease == holder.lease { // handed on: the lease moved with it
		t.Fatal("the lock was handed on without a fence reserved for it")
	}
	if h.lk.Fence() <= holder.Fence() {
		t.Fatalf("fence %d after %d", h.lk.Fence(), holder.Fence())
	}
}

// TestHandOffOnlyToLikeWaiters has the next waiter ask for another lease,
// or a fixed one: the lock must go back through Redis, so that the waiter
// gets the lease it asked for.
func TestHandOffOnlyToLikeWaiters(t *testing.T) {
	for _, o := range []Options{
		{Wait: 30 * time.Second, TTL: 7 * time.Second},
		{Wait: 30 * time.Second, NoRenew: true},
	} {
		l, _, _ := startLocker(t)
		ctx := context.Background()
		holder, got := holderWithWaiter(t, l, "like", o)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		h := <-got
		if h.lk == nil {
			return
		}
		if h.lk.lease == holder.lease { // handed on: the lease moved with it
			t.Fatalf("%+v: lock handed on to a waiter that asked for another lease", o)
		}
		if d, err := h.lk.TTL(ctx); err != nil || d <= 6*time.Second && o.TTL == 7*time.Second {
			t.Fatalf("%+v: lease %v, %v", o, d, err)
		}
		h.lk.Release(ctx)
	}
}

// TestYieldToAnotherLocker has a waiter in another Locker ask for a key
// that a Locker keeps handing on: when the reserved fences run out, the
// lock must go to the other Locker's waiter, not back to a local one.
func TestYieldToAnotherLocker(t *testing.T) {
	srv := redistest.Start(t)
	a := mustNew(t, srv.Client(t))
	defer a.Close()
	a.yield = 10 * time.Second // only the other Locker may take it meanwhile
	b := mustNew(t, srv.Client(t))
	defer b.Close()
	ctx := context.Background()
	const key = "yield"
	channel, _, _ := a.keys.lockKeys(key)

	holder, err := a.Acquire(ctx, key, Options{}) // one fence: no hand-off
	if err != nil {
		t.Fatal(err)
	}
	local := queueWaiters(t, a, key, 1, Options{Wait: 30 * time.Second})
	remote := queueWaiters(t, b, key, 1, Options{Wait: 30 * time.Second})
	// b's waiter found the key busy and said so: a hears it.
	awaitWaiters(t, a, key, "the other Locker's want notice", func(kw *keyWaiters) bool {
		_, wanted := kw.wanters[b.id]
		return wanted
	})

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r handed
	select {
	case r = <-remote:
	case l := <-local:
		t.Fatalf("the lock went back to the releasing Locker's waiter (fence %d)", l.lk.Fence())
	}
	if r.lk == nil {
		return
	}
	if r.lk.Fence() <= holder.Fence() {
		t.Fatalf("fence %d after %d", r.lk.Fence(), holder.Fence())
	}
	// Once the other Locker is done, the local waiter gets its turn.
	if err := r.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-local
	if l.lk == nil {
		return
	}
	defer l.lk.Release(ctx)
	if l.lk.Fence() <= r.lk.Fence() {
		t.Fatalf("fence %d after %d", l.lk.Fence(), r.lk.Fence())
	}

	// A yield marker is not a lock any token holds.
	if v := srv.Client(t).Get(ctx, channel).Val(); strings.HasPrefix(v, "y:") {
		t.Fatalf("key holds the yield marker %q while the local waiter holds the lock", v)
	}
}

// TestYieldTakesTurns has waiters of two other Lockers want a key: the
// holder's Locker must yield to the one whose id follows its own in
// circular order, so that competing processes take turns.
func TestYieldTakesTurns(t *testing.T) {
	srv := redistest.Start(t)
	lockers := make([]*Locker, 3)
	for i := range lockers {
		lockers[i] = mustNew(t, srv.Client(t))
		defer lockers[i].Close()
		lockers[i].yield = 10 * time.Second
	}
	holderL, p, q := lockers[0], lockers[1], lockers[2]
	ctx := context.Background()
	const key = "turns"

	holder, err := holderL.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	local := queueWaiters(t, holderL, key, 1, Options{Wait: 30 * time.Second})
	fromP := queueWaiters(t, p, key, 1, Options{Wait: 30 * time.Second})
	fromQ := queueWaiters(t, q, key, 1, Options{Wait: 30 * time.Second})
	awaitWaiters(t, holderL, key, "both want notices", func(kw *keyWaiters) bool {
		return len(kw.wanters) == 2
	})
	now := time.Now()
	want := nextInTurn(holderL.id, map[string]time.Time{p.id: now, q.id: now}, time.Time{})

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		got  *Locker
		h    handed
		rest []<-chan handed // the waiters still waiting
	)
	select {
	case h = <-fromP:
		got, rest = p, []<-chan handed{local, fromQ}
	case h = <-fromQ:
		got, rest = q, []<-chan handed{local, fromP}
	case l := <-local:
		t.Fatalf("the lock went back to the releasing Locker's waiter (fence %d)", l.lk.Fence())
	}
	if got.id != want {
		t.Fatal("the lock went to the Locker whose turn it was not")
	}
	if h.lk != nil {
		h.lk.Release(ctx)
	}
	// The others get it in turn; release it so that nothing outlives the
	// test.
	for range rest {
		var h handed
		select {
		case h = <-rest[0]:
		case h = <-rest[1]:
		}
		if h.lk != nil {
			h.lk.Release(ctx)
		}
	}
}

func TestNextInTurn(t *testing.T) {
	now := time.Now()
	ids := map[string]time.Time{"b": now, "d": now, "f": now, "e": now.Add(-time.Minute)}
	fresh := now.Add(-time.Second)
	// "e" asked too long ago: its waiters were served or gave up.
	for self, want := range map[string]string{"a": "b", "b": "d", "c": "d", "e": "f", "f": "b", "g": "b"} {
		if got := nextInTurn(self, ids, fresh); got != want {
			t.Errorf("nextInTurn(%q) = %q, want %q", self, got, want)
		}
	}
	if got := nextInTurn("a", map[string]time.Time{"b": now.Add(-time.Minute)}, fresh); got != "" {
		t.Errorf("nextInTurn with only a stale want = %q, want none", got)
	}
}

// TestHandOffUnderPausedRedis hands a lock round among goroutines of one
// Locker while the server is paused for two leases: no holder may start
// with a lease it cannot trust, a holder whose lease runs out must hear
// that its lock is lost, nobody may hold the lock together with another,
// fences must rise with every holder, and the locking must go on after the
// server comes back. It runs in a bubble, where the paused server holds
// every command until it resumes.
func TestHandOffUnderPausedRedis(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		l := b.locker(b.client())
		ctx := context.Background()
		const workers = 4
		// Holds longer than the lease: whoever has just taken the lock when
		// the server stops has its lease run out inside its critical section.
		ttl, hold := 300*time.Millisecond, 400*time.Millisecond
		started := make(chan struct{}, 1)
		var (
			mu        sync.Mutex
			fences    []int64
			inside    atomic.Int32
			lost      atomic.Int32
			afterStop atomic.Int32
			resumed   atomic.Bool
			wg        sync.WaitGroup
		)
		stop := time.Now().Add(3500 * time.Millisecond)
		for range workers {
			wg.Go(func() {
				for time.Now().Before(stop) {
					lk, err := l.Acquire(ctx, "paused", Options{TTL: ttl, Wait: time.Second})
					if err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					l.watchdog.mu.Lock()
					trusted := time.Until(lk.lease.validUntil)
					l.watchdog.mu.Unlock()
					if trusted <= 0 && lk.Err() == nil {
						t.Errorf("a holder started with a lease that had run out %v ago", -trusted)
					}
					mu.Lock()
					if n := len(fences); n > 0 && lk.Fence() <= fences[n-1] {
						t.Errorf("fence %d after %d", lk.Fence(), fences[n-1])
					}
					fences = append(fences, lk.Fence())
					mu.Unlock()
					if resumed.Load() {
						afterStop.Add(1)
					}
					select {
					case started <- struct{}{}:
					default:
					}
					select {
					case <-time.After(hold):
					case <-lk.Done():
					}
					if errors.Is(lk.Err(), ErrLockLost) {
						lost.Add(1)
					}
					inside.Add(-1)
					_ = lk.Release(ctx)
				}
			})
		}
		time.Sleep(time.Second)
		select { // pause the server just after a holder started
		case <-started:
		default:
		}
		<-started
		b.srv.Pause(2 * ttl)
		time.Sleep(2 * ttl)
		resumed.Store(true)
		wg.Wait()

		if lost.Load() == 0 {
			t.Error("no holder heard that its lock was lost while the server was paused")
		}
		if afterStop.Load() == 0 {
			t.Error("no lock was taken after the server came back")
		}
		if len(fences) < 5 {
			t.Errorf("only %d acquisitions: the workers hardly ran", len(fences))
		}
	})
}

// TestHandOffNotForLostLock has the holder learn that its lock is gone
// (TTL finds the token gone) before it releases: the lock must not be
// handed on, Release must say it was not held, and the waiter must take
// the lock from Redis, with a token of its own. It runs in a bubble.
func TestHandOffNotForLostLock(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		rdb := b.client()
		l := b.locker(rdb)
		ctx := context.Background()
		holder, got := holderWithWaiter(t, l, "gone", Options{Wait: 30 * time.Second})
		lockKey, _, _ := l.keys.lockKeys("gone")
		if err := rdb.Del(ctx, lockKey).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.TTL(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("TTL of a deleted lock: %v, want ErrNotHeld", err)
		}
		if err := holder.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Release of a lost lock: %v, want ErrNotHeld", err)
		}
		h := <-got
		if h.lk == nil {
			return
		}
		defer h.lk.Release(ctx)
		if h.lk.lease == holder.lease { // handed on: the lease moved with it
			t.Fatal("a lock known to be lost was handed on")
		}
	})
}

// A hand-off goes only to a waiter its grant was made for: when the
// waiter it was minted for leaves while the rename is on its way, the
// next waiter is not handed a token that names another's Options.Owner;
// it takes the lock from Redis under its own. (The lock once went to the
// next waiter under the token minted for the one that left, and every
// view of the holder named the wrong owner.)
func TestHandOffOnlyToTheWaiterItWasMadeFor(t *testing.T) {
	t.Parallel()
	attempts := &countAttempts{}
	l, _, _ := startLocker(t, WithObserver(attempts))
	ctx := ctxFor(t)
	key := testKey(t)
	o := Options{TTL: 10 * time.Second, Wait: time.Minute}
	// A waiting Acquire reserves fences to hand on with.
	holder := mustAcquire(t, l, ctx, key, Options{TTL: o.TTL, Wait: time.Second})
	parked := func(n int) {
		awaitWaiters(t, l, key, fmt.Sprintf("%d parked waiters", n), func(kw *keyWaiters) bool {
			if kw == nil || len(kw.waiters) != n {
				return false
			}
			for _, w := range kw.waiters {
				if !w.parked || len(w.wake) > 0 { // asleep, with no wake-up pending
					return false
				}
			}
			return true
		})
	}

	ctxA, cancelA := context.WithCancel(ctx)
	doneA := make(chan error, 1)
	go func() {
		oa := o
		oa.Owner = "waiter-A"
		lk, err := l.Acquire(ctxA, key, oa)
		if lk != nil {
			_ = lk.Release(ctx)
		}
		doneA <- err
	}()
	parked(1)
	gotB := make(chan *Lock, 1)
	go func() {
		ob := o
		ob.Owner = "waiter-B"
		lk, err := l.Acquire(ctx, key, ob)
		if err != nil {
			t.Errorf("B's Acquire: %v", err)
		}
		gotB <- lk
	}()
	parked(2)
	// A gives up while the rename made for it is on its way.
	l.confirming = func() {
		tried := attempts.n.Load()
		cancelA()
		<-doneA
		// B, first now, tries Redis (busy: the lock is still the
		// holder's) and sleeps again.
		for attempts.n.Load() == tried {
			time.Sleep(time.Millisecond)
		}
		parked(1)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	lk := <-gotB
	if lk == nil {
		return
	}
	defer lk.Release(ctx)
	if got := ownerOf(lk.Token()); got != "waiter-B" {
		t.Errorf("B holds the lock under a token naming owner %q, want waiter-B", got)
	}
}

// A hand-off whose rename ran, but whose waiter gave up while the rename
// was on its way, gives the key back to Redis when the waiter behind it
// came after the turn began and another Locker's waiter asked: Redis
// grants the key to that waiter's bid. The rename spent this Locker's bid
// (handover.lua), which by then was the waiter behind's: the release bids
// again for it, so that the other Locker's next release grants the key
// back (its turn) rather than finding no bid of this Locker's. (It once
// placed none, and the waiter lost its turn.)
func TestUnfinishedHandOffBidsAgain(t *testing.T) {
	t.Parallel()
	attempts := &countAttempts{}
	srv := redistest.Start(t)
	a := mustNew(t, srv.Client(t), WithObserver(attempts))
	defer a.Close()
	b := mustNew(t, srv.Client(t))
	defer b.Close()
	ctx := ctxFor(t)
	key := testKey(t)
	o := Options{TTL: 10 * time.Second, Wait: time.Minute}

	// b holds the key; a's holder-to-be and then its first waiter queue
	// behind it.
	first := mustAcquire(t, b, ctx, key, Options{TTL: o.TTL})
	holderGot := queueWaiters(t, a, key, 1, o)
	ctx1, cancel1 := context.WithCancel(ctx)
	done1 := make(chan error, 1)
	go func() {
		lk, err := a.Acquire(ctx1, key, o)
		if lk != nil {
			_ = lk.Release(ctx)
		}
		done1 <- err
	}()
	awaitWaiters(t, a, key, "a's first waiter in line", func(kw *keyWaiters) bool { return kw != nil && len(kw.waiters) == 2 })
	waitParked(t, a, key, 2)
	// b's release grants the key to a's bid: a's turn begins, with its
	// first waiter in line.
	holder := handedOnRelease(t, ctx, first, holderGot)
	// a's second waiter comes during the turn; then b's waiter asks.
	second := joinLine(t, a, key, "a's second waiter", o, 2)
	theirs := queueWaiters(t, b, key, 1, o)
	awaitWaiters(t, a, key, "b's want heard", func(kw *keyWaiters) bool { return len(kw.wanters) > 0 })
	// The first waiter gives up while the rename made for it is on its
	// way; the second, first now, tries Redis (busy: it bids) and sleeps
	// again.
	a.confirming = func() {
		tried := attempts.n.Load()
		cancel1()
		<-done1
		for attempts.n.Load() == tried {
			time.Sleep(time.Millisecond)
		}
		waitParked(t, a, key, 1)
	}
	if err := holder.lk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	a.confirming = nil
	hb := <-theirs
	if hb.lk == nil {
		t.Fatal("b's waiter got no lock")
	}
	bid, err := srv.Client(t).HGet(ctx, hb.lk.id.bidsKey(), a.id).Result()
	if err != nil {
		t.Fatalf("a's bid once its release granted the key to b's waiter: %v; want one, for a's waiter still in line", err)
	}
	if err := hb.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var lk *Lock
	select {
	case lk = <-second:
	case <-time.After(5 * time.Second):
		t.Fatalf("a's second waiter has no lock 5s after b's waiter let go (a's bid was %q)", bid)
	}
	if lk == nil {
		t.Fatal("a's second waiter got no lock")
	}
	defer lk.Release(ctx)
	if lk.Fence() <= hb.lk.Fence() {
		t.Fatalf("a's second waiter got fence %d after b's %d: want it above", lk.Fence(), hb.lk.Fence())
	}
}
