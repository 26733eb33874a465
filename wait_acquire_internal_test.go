package padlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestHandedLockLostBeforeWakeUp: a lock handed to a waiter that is lost
// before the waiter wakes is not returned by its Acquire.
func TestHandedLockLostBeforeWakeUp(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := context.Background()
	lk, err := l.Acquire(ctx, "lost-in-hand", Options{})
	if err != nil {
		t.Fatal(err)
	}
	lk.finish(ErrLockLost) // as the watchdog ends a lease it can no longer trust
	a := &acquisition{l: l, key: "lost-in-hand", o: Options{}, id: lk.id}
	got, err := a.receive(ctx, lk)
	if got != nil || err != nil {
		t.Fatalf("receive of a lost lock: %v, %v; want neither, so that the waiter tries Redis", got, err)
	}
	if n, _ := l.store.(single).client.Exists(ctx, lk.id.lockKey()).Result(); n != 0 {
		t.Fatal("the lost lock's key is still in Redis: receive must let it go")
	}
}

// TestCalledOffWaiterPassesHandedLockOn hands a lock to a waiter whose
// wait was called off as it came: the waiter must leave the line before it
// lets the lock go, so that the lock goes on to the next waiter by
// hand-off (the next fence), not back through Redis.
func TestCalledOffWaiterPassesHandedLockOn(t *testing.T) {
	l, _, _ := startLocker(t)
	l.recheck = time.Hour // the next waiter wakes for the hand-off alone
	ctx := context.Background()
	const key = "called-off"
	o := Options{Wait: 10 * time.Second}

	// The lock as it would be handed to the waiter below: taken by a
	// waiting Acquire, with fences to spare.
	handedLock, err := l.Acquire(ctx, key, o)
	if err != nil {
		t.Fatal(err)
	}
	handedLock.fenceEnd = handedLock.fence + 5

	// The waiter it is handed to, first in line, and one behind it.
	a := &acquisition{l: l, key: key, o: o.withDefaults(l.defaults), pacing: pacing{deadline: time.Now().Add(o.Wait)}}
	a.id = newLockID(l.keys, key, newToken(), a.o)
	a.w = l.notifier.join(ctx, a.id.lockKey(), a, a.bidsInLine())
	next := make(chan *Lock, 1)
	go func() {
		lk, err := l.Acquire(ctx, key, o)
		if err != nil {
			t.Errorf("next waiter: %v", err)
		}
		next <- lk
	}()
	awaitWaiters(t, l, key, "a second waiter", func(kw *keyWaiters) bool { return kw != nil && len(kw.waiters) == 2 })
	waitParked(t, l, key, 1)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	lk, err := a.receive(cctx, handedLock)
	if lk != nil || !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, %v; want ErrNotAcquired and context.Canceled", lk, err)
	}
	got := <-next
	if got == nil {
		return
	}
	defer got.Release(ctx)
	if got.Fence() != handedLock.Fence()+1 {
		t.Fatalf("next waiter got fence %d, want %d: the lock handed on, not taken anew from Redis", got.Fence(), handedLock.Fence()+1)
	}
}

// TestUnanswered checks which failed attempts count toward giving up on
// an unreachable Redis: not a slow grant, nor a Redlock vote that enough
// nodes answered but split, which the next attempt may settle.
func TestUnanswered(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", refused, true},
		{"timeout", context.DeadlineExceeded, true},
		{"late grant", errLateGrant, false},
		{"split vote", quorumOfOutcomes(3, NodeAgreed, NodeAgreed, NodeBusy, NodeBusy, NodeUnreachable), false},
		{"too few nodes", quorumOfOutcomes(3, NodeAgreed, NodeBusy, NodeUnreachable, NodeUnreachable, NodeUnreachable), true},
		{"restarting nodes", quorumOfOutcomes(2, NodeAgreed, NodeRestarting, NodeRestarting), false},
		{"restarting and down", quorumOfOutcomes(2, NodeRestarting, NodeUnreachable, NodeUnreachable), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unanswered(tc.err); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// quorumOfOutcomes is the QuorumError of an acquire whose nodes did as
// outcomes say, need of them being a majority.
func quorumOfOutcomes(need int, outcomes ...NodeOutcome) *QuorumError {
	q := &QuorumError{Op: "acquire", Need: need}
	for i, o := range outcomes {
		q.Nodes = append(q.Nodes, NodeResult{Index: i, Outcome: o})
	}
	return q
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
	// Each turn's line empties as its waiter is served, and the UNSUBSCRIBE
	// that follows goes behind the waiter. If it is confirmed only after
	// the next waiter subscribed, padlock subscribes once more, and that
	// confirmation wakes the waiter to try (a notice may have been missed
	// in between): awake at the release, it is rightly not handed the
	// lock. On a loaded machine the UNSUBSCRIBE is that slow, so each turn
	// waits for it to be confirmed before its waiter queues.
	var unsubscribed atomic.Int64
	l.notifier.unsubscribedSeen = func(string) { unsubscribed.Add(1) }
	awaitUnsubscribed := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); unsubscribed.Load() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the UNSUBSCRIBE after the line's last waiter left was not confirmed (%d of %d)", unsubscribed.Load(), n)
			}
		}
	}

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
		awaitUnsubscribed(int64(i))
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

// TestGiveUpLeavesNoBid: a waiter whose wait runs out withdraws its bid
// (or, fair, leaves the queue) behind its answer: nothing of it is left
// in Redis for a release to grant.
func TestGiveUpLeavesNoBid(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) {
			srv, a, b := twoLockers(t)
			ctx := context.Background()
			const key = "gave-up-no-bid"
			holder, err := a.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Release(ctx)
			if _, err := b.Acquire(ctx, key, Options{TTL: longLease, Wait: 300 * time.Millisecond, Fair: fair}); !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("waiter: %v", err)
			}
			rdb := srv.Client(t)
			if !fair {
				bidsGone(t, rdb, holder.id.bidsKey(), b.id)
				return
			}
			deadline := time.Now().Add(5 * time.Second)
			for rdb.LLen(ctx, holder.id.keys[2]).Val() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the queue holds %q 5s after its only waiter gave up", rdb.LRange(ctx, holder.id.keys[2], 0, -1).Val())
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// TestStaleBidNotGranted: a waiter killed bidLife before the release
// left its bid (or fair entry) standing; the release grants the key to
// nobody: it is free the moment the release returns.
func TestStaleBidNotGranted(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(mode(fair), func(t *testing.T) {
			srv := redistest.Start(t)
			h := mustNew(t, srv.Client(t))
			defer h.Close()
			dead, p := viaProxy(t, srv)
			ctx := context.Background()
			const key = "stale-bid"
			holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: fair})
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				if lk, err := dead.Acquire(ctx, key, Options{TTL: longLease, Wait: longLease, Fair: fair}); err == nil {
					lk.Release(ctx)
				}
			}()
			waitForWaiters(t, dead, key, 1)
			waitParked(t, dead, key, 1)
			p.Close()
			time.Sleep(bidLife + 100*time.Millisecond)
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if v, err := srv.Client(t).Get(ctx, holder.id.lockKey()).Result(); err != redis.Nil {
				t.Fatalf("the key holds %q (%v) after the release: a bid placed over %v before was granted", v, err, bidLife)
			}
		})
	}
}

// TestBidKeptFresh: a waiter that bids places its bid again every
// bidRefresh while it waits, even when nothing else would wake it (a
// holder with a long lease, no recheck): its bid is never bidLife old.
func TestBidKeptFresh(t *testing.T) {
	srv, a, b := twoLockers(t)
	b.recheck = time.Hour
	ctx := context.Background()
	const key = "fresh-bid"
	holder, err := a.Acquire(ctx, key, Options{TTL: longLease})
	if err != nil {
		t.Fatal(err)
	}
	got := queueWaiters(t, b, key, 1, Options{TTL: longLease, Wait: longLease})
	rdb := srv.Client(t)
	bidStaysFresh(t, rdb, holder.id, b, bidLife+time.Second, "")
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	nextLiveWaiter(t, got, released).Release(ctx)
}

// bidStaysFresh reads, every 50 ms for d, the bid of waiting Locker b on
// id's key, and fails t if it is missing or bidLife old; while says what
// else went on.
func bidStaysFresh(t *testing.T, rdb *redis.Client, id *lockID, b *Locker, d time.Duration, while string) {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		// "<ms registered> <lease ms> <token>" (lua/bids.lua)
		v, err := rdb.HGet(ctx, id.bidsKey(), b.id).Result()
		if err != nil && err != redis.Nil {
			// The test's own read got no answer (a loaded machine): it
			// says nothing of the bid.
			t.Logf("reading the bid: %v; again", err)
			continue
		}
		at, _, _ := strings.Cut(v, " ")
		placed, err := strconv.ParseInt(at, 10, 64)
		if err != nil {
			t.Fatalf("no bid of the waiter in Redis: %q", at)
		}
		if age := time.Duration(rdb.Time(ctx).Val().UnixMilli()-placed) * time.Millisecond; age >= bidLife {
			t.Fatalf("the waiter's bid is %v old%s: not placed again every %v", age, while, bidRefresh)
		}
	}
}

// TestBidKeptFreshWhileOthersAreGranted: grants to other Lockers' bids
// come and go while a waiter bids (the notice "g<ms> <token>" of each
// moves when the waiter looks again, to the grant's end, in case nobody
// claims it). The waiter still places its bid again bidRefresh after its
// last attempt: those wake-ups do not put it off. (Before, each one
// counted bidRefresh from itself, so grants heard more often than every
// bidRefresh kept the bid from ever being placed again, and a release
// then skipped it as stale: the Locker lost its turn.)
func TestBidKeptFreshWhileOthersAreGranted(t *testing.T) {
	srv, a, b := twoLockers(t)
	b.recheck = time.Hour
	ctx := context.Background()
	const key = "fresh-bid-grants"
	holder, err := a.Acquire(ctx, key, Options{TTL: longLease})
	if err != nil {
		t.Fatal(err)
	}
	got := queueWaiters(t, b, key, 1, Options{TTL: longLease, Wait: longLease})
	rdb := srv.Client(t)
	stop := make(chan struct{})
	published := make(chan struct{})
	go func() {
		defer close(published)
		for {
			select {
			case <-stop:
				return
			case <-time.After(claimWindow / 2):
			}
			// A grant to a bid of some other Locker: its waiter claims it
			// (or not) within the claim window.
			rdb.Publish(ctx, holder.id.lockKey(), fmt.Sprintf("g%d %s", claimWindow.Milliseconds(), newToken()))
		}
	}()
	defer func() { close(stop); <-published }()
	bidStaysFresh(t, rdb, holder.id, b, bidLife+2*time.Second, " while grants elsewhere came and went")
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	nextLiveWaiter(t, got, released).Release(ctx)
}

// TestFairLateCopyQueuesNobody: a fair waiter's attempt sent after Redis
// confirmed it queued (the attempt after its first, answered busy) is
// copied on its way, as a proxy that sends a request again may, and the
// copy reaches Redis after the waiter was served, or gave up, while the
// key is held. Only attempts sent before that confirmation ask to join,
// so the copy queues nobody: no entry or bid of the waiter is left in the
// queue, and the next release grants the key to the next live waiter, not
// to the copy's token. (Every fair attempt asking to join queued the copy
// for a release to grant, holding the key for nobody for a claim window:
// mutant 45.)
func TestFairLateCopyQueuesNobody(t *testing.T) {
	for _, left := range []struct{ name, what string }{
		{"served", "was served"},
		{"gave-up", "gave up"},
	} {
		t.Run(left.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			h, live := mustNew(t, srv.Client(t)), mustNew(t, srv.Client(t))
			defer h.Close()
			defer live.Close()
			sent := &sentScript{s: acquireFairScript}
			wc := srv.Client(t)
			wc.AddHook(sent)
			w := mustNew(t, wc)
			defer w.Close()
			ctx := context.Background()
			const key = "fair-late-copy"
			o := Options{TTL: longLease, Wait: longLease, Fair: true}

			holder, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: true})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			served := make(chan *Lock, 1)
			go func() {
				lk, _ := w.Acquire(wctx, key, o)
				served <- lk
			}()
			waitForWaiters(t, w, key, 1)
			waitParked(t, w, key, 1)
			copied := afterQueued(t, sent)
			token := fmt.Sprint(scriptArgv(copied)[0])

			next := holder // who lets the key go to the live waiter
			if left.name == "served" {
				if err := holder.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if next = <-served; next == nil {
					t.Fatal("the waiter was not served")
				}
			} else {
				cancel()
				if lk := <-served; lk != nil {
					t.Fatal("the waiter that gave up holds the key")
				}
				w.Close() // its leave and its withdraw are done
			}
			sent.replay(t, rdb, copied)
			queue := holder.id.keys[2]
			if q := rdb.LRange(ctx, queue, 0, -1).Val(); len(q) != 0 {
				t.Errorf("the queue holds %q after a late copy of an attempt of a waiter that %s; want it empty", q, left.what)
			}

			got := queueWaiters(t, live, key, 1, o)
			released := time.Now()
			if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if v := rdb.Get(ctx, holder.id.lockKey()).Val(); strings.HasPrefix(v, token+"|") {
				t.Errorf("the release granted the key to the late copy's token (%q), which nobody waits on; want the live waiter's", v)
			}
			nextLiveWaiter(t, got, released).Release(ctx)
		})
	}
}

// afterQueued returns the first attempt the waiter sent after Redis
// answered one busy, confirming it queued: a retry once its notices
// flowed, or its bid placed again within bidRefresh.
func afterQueued(t *testing.T, sent *sentScript) []any {
	t.Helper()
	for deadline := time.Now().Add(3 * bidRefresh); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if calls := sent.calls(); len(calls) >= 2 {
			return calls[1]
		}
	}
	t.Fatal("the waiter sent no attempt after its first was answered")
	return nil
}

// sentScript is a go-redis hook that keeps, in order, the arguments of
// every call of one script that Redis ran and answered, alone or in a
// pipeline.
type sentScript struct {
	s    *script
	mu   sync.Mutex
	kept [][]any
}

func (h *sentScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sentScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.keep(cmd)
		return err
	}
}

func (h *sentScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.keep(c)
		}
		return err
	}
}

func (h *sentScript) keep(cmd redis.Cmder) {
	if !h.s.is(cmd.Args()) || cmd.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kept = append(h.kept, slices.Clone(cmd.Args()))
}

// calls returns the calls kept so far.
func (h *sentScript) calls() [][]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.kept)
}

// replay runs args, a call kept, on Redis again through c, as EVAL (the
// copy of a request that reaches Redis late).
func (h *sentScript) replay(t *testing.T, c *redis.Client, args []any) {
	t.Helper()
	args = slices.Clone(args)
	args[0], args[1] = "eval", h.s.src
	if err := c.Do(context.Background(), args...).Err(); err != nil && err != redis.Nil {
		t.Fatalf("the late copy: %v", err)
	}
}
