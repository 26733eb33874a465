package padlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// holderWithWaiter takes key on l as a waiting holder with fences reserved
// for waiters behind it, and queues one waiter with options o behind it.
func holderWithWaiter(t *testing.T, l *Locker, key string, o Options) (*Lock, <-chan handed) {
	t.Helper()
	holder, err := l.Acquire(context.Background(), key, Options{Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	holder.fenceEnd = holder.fence + 5 // as if waiters had queued behind it
	return holder, queueWaiters(t, l, key, 1, o)
}

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

// TestHandOffBlockOutlastsShortLine has two workers take turns on a key
// in one Locker, each queueing again behind the other after its release,
// as workers cycling on a hot key do. The waiter that takes the lock from
// Redis, alone in line then, must still reserve a block of fences: every
// turn after it is a hand-off with the next fence, none goes back to Redis
// while the block lasts.
func TestHandOffBlockOutlastsShortLine(t *testing.T) {
	srv := redistest.Start(t)
	tried := &countAttempts{}
	l := mustNew(t, srv.Client(t), WithObserver(tried))
	defer l.Close()
	other := mustNew(t, srv.Client(t))
	defer other.Close()
	ctx := context.Background()
	const key, turns = "short-line", 2 * handoffBlock / 3
	// Waiters that sleep until handed the lock: one awake for a retry
	// when its turn comes is not handed it (handOff).
	o := Options{Wait: 30 * time.Second, Retry: LinearBackoff(time.Hour)}
	l.recheck = time.Hour

	// A waiter alone in line subscribes to the key's notices after its
	// first attempt, and tries once more when the subscription is
	// confirmed (a release in between would go unnoticed): a release
	// while it is awake for that attempt goes back to Redis, as it
	// should. Wait for that second attempt and the sleep after it, however
	// slow the subscription on a loaded machine.
	asleepAfterSecondTry := func() <-chan handed {
		t.Helper()
		before := tried.n.Load()
		got := queueWaiters(t, l, key, 1, o)
		awaitWaiters(t, l, key, "the waiter asleep after trying again with notices live", func(kw *keyWaiters) bool {
			return kw != nil && kw.live && tried.n.Load() >= before+2 && asleep(kw) == 1
		})
		return got
	}

	holder, err := other.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := asleepAfterSecondTry() // alone in line
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	prev := <-got
	if prev.lk == nil {
		t.Fatal("the waiter did not get the lock")
	}
	for i := 1; i <= turns; i++ {
		got = asleepAfterSecondTry() // the other worker, back in line
		if err := prev.lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
		h := <-got
		if h.lk == nil {
			t.Fatalf("turn %d: the waiter did not get the lock", i)
		}
		if h.lk.lease != prev.lk.lease || h.lk.Fence() != prev.lk.Fence()+1 {
			t.Fatalf("turn %d: fence %d after %d, lease handed on: %v; want every turn handed on with the next fence while the block lasts",
				i, h.lk.Fence(), prev.lk.Fence(), h.lk.lease == prev.lk.lease)
		}
		prev = h
	}
	if err := prev.lk.Release(ctx); err != nil {
		t.Fatal(err)
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

// TestHandOffKeepsRenewing hands a short-lease lock round and round among
// goroutines of one Locker for several leases: the watchdog must go on
// renewing it through every hand-off, including those that happen while a
// renewal is on its way, and nobody may ever find it lost or shared. It
// runs in a bubble.
func TestHandOffKeepsRenewing(t *testing.T) {
	inBubble(t, func(t *testing.T, b *bubble) {
		l := b.locker(b.client())
		ctx := context.Background()
		const key, workers = "round", 4
		// Short leases so that hand-offs span renewals, long enough that a
		// loaded machine renews in time.
		o := Options{TTL: 800 * time.Millisecond, Wait: 10 * time.Second}
		var (
			inside atomic.Int32
			wg     sync.WaitGroup
			mu     sync.Mutex
			runs   = map[*lease]int{} // acquisitions per Redis lock (a hand-off moves its lease on)
		)
		stop := time.Now().Add(8 * o.TTL) // eight leases
		for range workers {
			wg.Go(func() {
				for time.Now().Before(stop) {
					lk, err := l.Acquire(ctx, key, o)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					runs[lk.lease]++
					mu.Unlock()
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					time.Sleep(20 * time.Millisecond) // hand-offs span renewals
					inside.Add(-1)
					if err := lk.Err(); err != nil {
						t.Errorf("lock ended while held: %v", err)
					}
					if err := lk.Release(ctx); err != nil {
						t.Errorf("release: %v", err)
					}
				}
			})
		}
		wg.Wait()
		longest := 0
		for _, n := range runs {
			longest = max(longest, n)
		}
		// 20ms holds, renewed every 50ms: a lock held by 4 or more holders in
		// a row was renewed while being handed on.
		if longest < 4 {
			t.Fatalf("the most holders one Redis lock was handed to was %d; want a run long enough to span renewals", longest)
		}
	})
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

// TestFenceCounterAheadOfClock sets the fence counter far ahead of the
// server clock, as a clock stepped back would: fences must go on from the
// counter, and no block may be reserved that would carry it further ahead.
func TestFenceCounterAheadOfClock(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := mustNew(t, rdb)
	defer l.Close()
	ctx := context.Background()
	_, fenceKey, _ := l.keys.lockKeys("ahead")
	const high = 8_000_000_000_000_000 // about 2223 in µs, and exact in a float64
	if err := rdb.Set(ctx, fenceKey, high, 0).Err(); err != nil {
		t.Fatal(err)
	}
	lk, err := l.Acquire(ctx, "ahead", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if lk.Fence() != high+1 {
		t.Fatalf("fence %d, want %d: one above the counter", lk.Fence(), int64(high+1))
	}
	lk.Release(ctx)

	// A block of 5 reserved from there leaves the counter at its end.
	id := newLockID(l.keys, "ahead2", newToken(), Options{TTL: time.Minute})
	g, err := l.store.acquire(ctx, id, reserving(id, l, 5))
	if err != nil || g.first != high+2 || g.last != high+2 {
		t.Fatalf("got fences %d-%d (%v), want %d alone: a counter ahead of the clock reserves no block", g.first, g.last, err, int64(high+2))
	}
	if v, _ := rdb.Get(ctx, fenceKey).Int64(); v != high+2 {
		t.Fatalf("counter %d, want %d", v, int64(high+2))
	}

	// With the counter behind the clock, the block is reserved.
	if err := rdb.Set(ctx, fenceKey, 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	id = newLockID(l.keys, "ahead3", newToken(), Options{TTL: time.Minute})
	g, err = l.store.acquire(ctx, id, reserving(id, l, 5))
	if err != nil || g.last != g.first+4 {
		t.Fatalf("got fences %d-%d (%v), want a block of 5", g.first, g.last, err)
	}
	if v, _ := rdb.Get(ctx, fenceKey).Int64(); v != g.last {
		t.Fatalf("counter %d after a block ending at %d", v, g.last)
	}
}

// reserving returns the attempt of a waiting Acquire of l at id that
// reserves n fences.
func reserving(id *lockID, l *Locker, n int64) *attempt {
	return &attempt{argv: [5]any{id.argv[0], id.argv[1], n, l.idArg, "1"}}
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

// TestExtendFollowsHandOff has an Extend of the releasing handle land after
// the lock was handed on: the new holder must trust the lease that Extend
// may have set in Redis, not the one it inherited.
func TestExtendFollowsHandOff(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := context.Background()
	holder, got := holderWithWaiter(t, l, "late-extend", Options{Wait: 30 * time.Second})
	// What Extend does before it sends its PEXPIRE of the shared token,
	// with the lease the waiter asked for, so the lock may be handed on.
	seq, _, _ := l.watchdog.begin(holder.lease, holder, DefaultTTL, true)
	sent := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.lk == nil || h.lk.lease != holder.lease {
		t.Fatal("the lock was not handed on")
	}
	defer h.lk.Release(ctx)
	// Its reply is lost after the hand-off: it may run at any time.
	l.watchdog.settle(holder.lease, seq, false)
	l.watchdog.mu.Lock()
	until := h.lk.lease.validUntil
	l.watchdog.mu.Unlock()
	if until.After(sent.Add(DefaultTTL)) {
		t.Fatalf("new holder trusts its lease until %v after the Extend was sent; want at most %v", until.Sub(sent), DefaultTTL)
	}
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

// countAttempts counts the attempts that did not take a lock.
type countAttempts struct {
	NopObserver
	n atomic.Int64
}

func (c *countAttempts) AcquireAttempt(context.Context, AcquireAttemptEvent) { c.n.Add(1) }

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

// loseHandover is a go-redis hook that lets the first hand-off
// (lua/handover.lua) run on the server and then fails it, as a reply lost
// to a read timeout would.
type loseHandover struct{ n atomic.Int32 }

func (*loseHandover) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*loseHandover) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *loseHandover) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || args[1] != handoverScript.Hash() || h.n.Add(1) != 1 {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		lost := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		cmd.SetErr(lost)
		return lost
	}
}

// TestHandOffReplyLost: the round trip that moves a lock to the next
// local holder's token runs, but its reply is lost. The lock must not be
// handed on (its move is not confirmed), nor left locked under either
// token, and Release must say it could not tell (ErrUnavailable), not that
// the lock was lost; the waiter then takes the key from Redis.
func TestHandOffReplyLost(t *testing.T) {
	l, srv, rdb := startLocker(t)
	hook := &loseHandover{}
	rdb.AddHook(hook)
	ctx := ctxFor(t)
	key := testKey(t)
	if err := handoverScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	holder, got := holderWithWaiter(t, l, key, Options{Wait: 10 * time.Second})
	waitParked(t, l, key, 1)
	err := holder.Release(ctx)
	if hook.n.Load() == 0 {
		t.Fatal("scenario not staged: no hand-off was sent")
	}
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotHeld) {
		t.Errorf("Release with the hand-off's reply lost: got %v, want ErrUnavailable and not ErrNotHeld", err)
	}
	if holder.Err() != ErrReleased {
		t.Errorf("holder's Err: got %v, want ErrReleased", holder.Err())
	}
	h := <-got
	if h.lk == nil {
		t.Fatal("the waiter got no lock")
	}
	defer h.lk.Release(ctx)
	if h.lk.lease == holder.lease {
		t.Error("the lock was handed on although its move to the waiter's token was not confirmed")
	}
	if v, err := srv.Client(t).Get(ctx, l.RedisKey(key)).Result(); err != nil || tokenOf(v) != h.lk.Token() {
		t.Errorf("lock key holds %q (%v), want the waiter's token %q", v, err, h.lk.Token())
	}
}

// resetHandover makes the first hand-off command run and then fail as a
// closed connection does, so that padlock sends it again.
type resetHandover struct{ n atomic.Int32 }

func (h *resetHandover) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *resetHandover) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *resetHandover) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if cmd.Name() != "evalsha" || len(args) < 2 || args[1] != handoverScript.Hash() || h.n.Add(1) != 1 {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		cmd.SetErr(io.EOF) // the connection closed after the server ran it
		return io.EOF
	}
}

// TestHandOffSentAgainIsNoLoss: a Release hands the lock to a waiter of its
// Locker; Redis runs the hand-off, the connection closes before its reply,
// and padlock sends it again. The copy finds the lock under the waiter's
// token: the hand-off happened, and neither the releaser nor the waiter is
// told the lock was lost.
// Regression: the copy said ErrNotHeld; the lock stayed under a lost token.
func TestHandOffSentAgainIsNoLoss(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	if err := handoverScript.Load(ctx, rdb).Err(); err != nil { // one EVALSHA per hand-off
		t.Fatal(err)
	}
	hook := &resetHandover{}
	rdb.AddHook(hook)
	l := mustNew(t, rdb)
	defer l.Close()
	key := testKey(t)
	holder, got := holderWithWaiter(t, l, key, Options{Wait: 10 * time.Second})
	err := holder.Release(ctx)
	if hook.n.Load() < 2 {
		t.Fatalf("scenario not staged: %d hand-off command(s) sent, want the hand-off and its copy", hook.n.Load())
	}
	if errors.Is(err, ErrNotHeld) {
		t.Errorf("Release whose hand-off ran, its copy sent again = %v, want nil", err)
	}
	var next *Lock
	select {
	case h := <-got:
		next = h.lk
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not handed the lock")
	}
	if next == nil {
		t.Fatal("the waiter's Acquire failed")
	}
	defer next.Release(ctx)
	if err := next.Err(); err != nil {
		t.Errorf("the waiter's lock: Err = %v, want nil", err)
	}
	if v, _ := rdb.Get(ctx, l.RedisKey(key)).Result(); tokenOf(v) != next.Token() {
		t.Errorf("Redis holds the lock under %q, the waiter's token is %q", tokenOf(v), next.Token())
	}
}

// TestNoHandOffAfterRestart: the server restarts without persistence while
// a Locker holds a lock with waiters; another Locker takes the key. A
// waiter that asked after that must not be handed the old lock, the old
// holder's Release must say it was not held, and every lock taken after
// the restart must have a fence above the other Locker's.
// Regression: a waiter was handed the lock the restart had lost.
func TestNoHandOffAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Real() {
		t.Skip("needs a redis-server to restart")
	}
	a := mustNew(t, srv.Client(t))
	defer a.Close()
	b := mustNew(t, srv.Client(t))
	defer b.Close()
	ctx := context.Background()
	const key = "restart"
	holder, err := a.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	holder.fenceEnd = holder.fence + 5 // as if waiters had queued behind it
	type result = acquireResult
	wait := func() <-chan result {
		got := make(chan result, 1)
		go func() {
			lk, err := a.Acquire(ctx, key, Options{Wait: 20 * time.Second})
			got <- result{lk, err}
		}()
		return got
	}
	first := wait()
	waitParked(t, a, key, 1)

	srv.Restart(t)
	theirs, err := b.Acquire(ctx, key, Options{Wait: 5 * time.Second})
	if errors.Is(err, ErrNotAcquired) {
		// On a loaded machine the first waiter may try the restarted
		// server before the other Locker does (its subscription broke, so
		// it polls) and take the key there: a lock Redis granted anew,
		// which is allowed. The old lock handed on is not.
		firstAfterRestart(t, ctx, first, holder)
		return
	}
	if err != nil {
		t.Fatalf("Acquire after the restart: %v", err)
	}
	second := wait() // asks after the other Locker's Acquire returned
	waitParked(t, a, key, 2)

	if err := holder.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release of a lock the restart lost: %v, want ErrNotHeld", err)
	}
	select {
	case r := <-first:
		if r.lk != nil {
			t.Fatalf("first waiter got a lock (fence %d, Err %v) while the other Locker holds the key (fence %d)", r.lk.Fence(), r.lk.Err(), theirs.Fence())
		}
		t.Fatalf("first waiter done while the key was held: %v", r.err)
	case r := <-second:
		if r.lk != nil {
			t.Fatalf("second waiter got a lock (fence %d, Err %v) while the other Locker holds the key (fence %d)", r.lk.Fence(), r.lk.Err(), theirs.Fence())
		}
		t.Fatalf("second waiter done while the key was held: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := theirs.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i, got := range []<-chan result{first, second} {
		r := <-got
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		if r.lk.Fence() <= theirs.Fence() {
			t.Errorf("waiter %d got fence %d, not above %d of the lock taken after the restart", i, r.lk.Fence(), theirs.Fence())
		}
		r.lk.Release(ctx)
	}
}

// acquireResult is what an Acquire run in a goroutine returned.
type acquireResult struct {
	lk  *Lock
	err error
}

// firstAfterRestart checks a lock the first waiter of
// TestNoHandOffAfterRestart took on the restarted server: Redis granted it
// under a token of its own (a hand-off would carry the old holder's), and
// the old holder's Release says it was not held.
func firstAfterRestart(t *testing.T, ctx context.Context, first <-chan acquireResult, holder *Lock) {
	t.Helper()
	var lk *Lock
	select {
	case r := <-first:
		if r.err != nil {
			t.Fatalf("the other Locker found the key held, but the first waiter has no lock: %v", r.err)
		}
		lk = r.lk
	case <-time.After(5 * time.Second):
		t.Fatal("the other Locker found the key held, and the first waiter has no lock either")
	}
	defer lk.Release(ctx)
	if lk.lease == holder.lease { // handed on: the lease moved with it
		t.Fatal("the first waiter was handed the lock the restart lost")
	}
	if _, err := lk.TTL(ctx); err != nil {
		t.Fatalf("the first waiter's lock is not the one in Redis: %v", err)
	}
	if err := holder.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release of a lock the restart lost: %v, want ErrNotHeld", err)
	}
}

// TestFairAcquisitionCommands counts the server commands of a contended
// fair acquisition within one Locker, as Redis counts them (INFO
// commandstats: the EVALSHA and every command its script runs): the
// waiter's attempt that finds the key held and joins the queue, and the
// holder's release that hands the lock to it. Each costs at most 6: the
// join does not read the head of the queue while the key is held, nor move
// the queue's expiry when an entry's deadline already covers its own
// second; the hand-off serves the head in one pop.
func TestFairAcquisitionCommands(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := mustNew(t, rdb)
	defer l.Close()
	l.recheck = time.Minute // wake-ups come from hand-offs alone
	ctx := ctxFor(t)
	key := testKey(t)
	o := Options{Fair: true, Wait: 30 * time.Second}
	if err := plainScripts.handoverFair.Load(ctx, rdb).Err(); err != nil { // one EVALSHA per hand-off
		t.Fatal(err)
	}

	holder := mustAcquire(t, l, ctx, key, o)
	// The first waiter subscribes to the key's notices; the second finds
	// them flowing, as every waiter does while the key stays contended.
	// The first waits longer, so its deadline covers the second's and the
	// queue's expiry stays (on a busy key, most joins find one that does).
	first := queueWaiters(t, l, key, 1, Options{Fair: true, Wait: time.Minute})
	stats := srv.Client(t)
	resetStats(t, stats)
	second := make(chan *Lock, 1)
	go func() {
		lk, err := l.Acquire(context.Background(), key, o)
		if err != nil {
			t.Errorf("second waiter: %v", err)
		}
		second <- lk
	}()
	waitForWaiters(t, l, key, 2)
	waitParked(t, l, key, 2)
	join := commandsRun(t, stats)

	resetStats(t, stats)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-first
	if h.lk == nil || !handedOn(h.lk) {
		t.Fatalf("first waiter: got %v, want the lock handed on", h.lk)
	}
	handOff := commandsRun(t, stats)
	t.Logf("join: %v; hand-off: %v", join, handOff)
	if n := join.total(); n > 6 {
		t.Errorf("the attempt that joins the queue ran %d commands, want at most 6: %v", n, join)
	}
	if n := handOff.total(); n > 6 {
		t.Errorf("the hand-off ran %d commands, want at most 6: %v", n, handOff)
	}

	if err := h.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if lk := <-second; lk == nil {
		t.Fatal("second waiter: no lock")
	} else if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// commandCounts are calls per command name, from INFO commandstats.
type commandCounts map[string]int

func (c commandCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c commandCounts) String() string {
	names := make([]string, 0, len(c))
	for name := range c {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", name, c[name])
	}
	return b.String()
}

func resetStats(t *testing.T, c *redis.Client) {
	t.Helper()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// commandsRun returns the commands the server ran since its stats were
// reset, leaving out those of connections (HELLO, CLIENT), of pub/sub,
// and of the test itself (CONFIG, INFO).
func commandsRun(t *testing.T, c *redis.Client) commandCounts {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := commandCounts{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		switch strings.SplitN(name, "|", 2)[0] {
		case "hello", "client", "subscribe", "unsubscribe", "ping", "config", "info":
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		got[name] = n
	}
	return got
}

// TestTurnsTakenWhenTheHolderHasABlock: Lockers take turns. A holder that
// took the key with a wait (so with a block of fences it could hand on
// within its Locker) releases while a waiter of its own Locker and one of
// another Locker that asked wait: the other Locker's waiter gets it
// first. (A test whose holder had one fence, and so could never hand on,
// let a break of the turns pass.)
func TestTurnsTakenWhenTheHolderHasABlock(t *testing.T) {
	_, a, b := twoLockers(t)
	ctx := context.Background()
	const key = "turns-block"
	holder, err := a.Acquire(ctx, key, Options{Wait: time.Second}) // a waiting Acquire: a block of fences
	if err != nil {
		t.Fatal(err)
	}
	local := queueWaiters(t, a, key, 1, Options{Wait: 30 * time.Second})
	other := queueWaiters(t, b, key, 1, Options{Wait: 30 * time.Second})
	awaitWaiters(t, a, key, "want notice", func(kw *keyWaiters) bool { return len(kw.wanters) == 1 })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-other:
		h.lk.Release(ctx)
		h2 := <-local
		h2.lk.Release(ctx)
	case h := <-local:
		h.lk.Release(ctx)
		<-other
		t.Fatalf("the releasing Locker kept the key for its own waiter (fence %d after %d) though another Locker's waiter asked", h.lk.Fence(), holder.Fence())
	}
}

// TestTurnServesOnlyTheWaitersQueuedAsItBegan: a Locker's turn covers the
// waiters in its line when it took the key, not the ones that came
// after, even when one of the first gave up: a's first waiter takes the
// key with a's second behind it; the second gives up and a third joins;
// the first's release goes to b's waiter, which asked, not to the third.
// (A count of the waiters queued let the third take the second's place.)
func TestTurnServesOnlyTheWaitersQueuedAsItBegan(t *testing.T) {
	_, a, b := twoLockers(t)
	ctx := context.Background()
	const key = "turn-members"
	o := Options{Wait: 30 * time.Second}
	holder, err := b.Acquire(ctx, key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mine := queueWaiters(t, a, key, 1, o)
	// a's second waiter, which gives up once a's first holds the key.
	gaveUp := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		lk, err := a.Acquire(sctx, key, o)
		if lk != nil {
			lk.Release(ctx)
		}
		gaveUp <- err
	}()
	awaitWaiters(t, a, key, "a's second waiter in line", func(kw *keyWaiters) bool { return kw != nil && len(kw.waiters) == 2 })
	waitParked(t, a, key, 2)
	theirs := queueWaiters(t, b, key, 1, o)
	first := handedOnRelease(t, ctx, holder, mine)
	stop()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a's second waiter: %v, want context.Canceled", err)
	}
	third := joinLine(t, a, key, "a's third waiter", o, 1)
	awaitWaiters(t, a, key, "b's want heard", func(kw *keyWaiters) bool { return len(kw.wanters) > 0 })
	if err := first.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case hb := <-theirs:
		if hb.lk == nil {
			t.Fatal("b's waiter got no lock")
		}
		if err := hb.lk.Release(ctx); err != nil {
			t.Fatal(err)
		}
	case lk := <-third:
		t.Fatalf("a's third waiter, which came during a's turn, got the key (fence %d after %d) before b's waiter, which asked", lk.Fence(), first.lk.Fence())
	}
	if lk := <-third; lk != nil {
		lk.Release(ctx)
	}
}
