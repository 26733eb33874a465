package padlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/padlockgo/padlock/internal/faultproxy"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestLockSizeClass guards the bytes of the uncontended lock cycle: every
// Acquire allocates a Lock (with its lease inside) and a lockID, and Go
// rounds an allocation up to its size class, so a field that pushes one
// past its bound costs 16 or 32 bytes more per cycle
// (BenchmarkAcquireRelease's B/op). Reorder fields to fill padding first;
// raise a bound only knowingly.
func TestLockSizeClass(t *testing.T) {
	tests := []struct {
		name string
		size uintptr
		want uintptr // the runtime size class it must fit
	}{
		{"Lock", unsafe.Sizeof(Lock{}), 384},     // classes around it: 352, 384, 416
		{"lockID", unsafe.Sizeof(lockID{}), 128}, // classes around it: 112, 128, 144
	}
	for _, tt := range tests {
		if tt.size > tt.want {
			t.Errorf("got unsafe.Sizeof(%s{}) = %d, want at most %d", tt.name, tt.size, tt.want)
		}
	}
}

// TestErrReportsLossWithoutTheWatchdog: Err reports a lock lost once its
// trusted lease has run out, even while the watchdog cannot run to close
// Done.
// Regression: Err said held past the trusted lease, until the watchdog woke.
func TestErrReportsLossWithoutTheWatchdog(t *testing.T) {
	l, _, _ := startLocker(t)
	ctx := context.Background()
	// A grant whose reply came after its 100 ms lease (a loaded machine)
	// is asked for again.
	lk := mustAcquire(t, l, ctx, "stalled", Options{TTL: 100 * time.Millisecond, NoRenew: true})
	defer lk.Release(ctx)
	l.watchdog.mu.Lock() // the watchdog stalls, as on a starved runtime
	until := lk.lease.validUntil
	time.Sleep(time.Until(until) + 5*time.Millisecond)
	err := lk.Err()
	select {
	case <-lk.Done():
	default:
		l.watchdog.mu.Unlock()
		t.Fatal("Done open after Err reported the lock lost")
	}
	l.watchdog.mu.Unlock()
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("Err after the trusted lease ran out, watchdog stalled: %v, want ErrLockLost", err)
	}
}

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

// endsOnItsWay is a go-redis hook that makes every call of the scripts
// in shas, on a caller's context with a deadline (not a clean-up's), wait
// for that deadline and fail with the context's error without reaching
// Redis: a context that ends as the command goes out.
type endsOnItsWay struct {
	shas  []string
	ended atomic.Int32
}

func (h *endsOnItsWay) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *endsOnItsWay) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if _, ok := ctx.Deadline(); ok && ctx.Value(cleanupKey{}) == nil && len(args) > 1 && args[0] == "evalsha" && slices.Contains(h.shas, fmt.Sprint(args[1])) {
			<-ctx.Done()
			h.ended.Add(1)
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}

func (h *endsOnItsWay) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestReleaseWhoseContextEndsOnItsWay: the caller's context ends as its
// Release goes out, so the release never reaches Redis. It is sent again
// on a clean-up's context, as a release on a context that had ended
// already is: Release returns nil, and the key is free, for a Lock and
// for an AcquireAll's set. (Before, the key stayed locked, for nobody,
// for the rest of its lease: the explorer's idle invariant, fleet seed
// 1048733, where a hand-off's slow reply took the Release's deadline.)
func TestReleaseWhoseContextEndsOnItsWay(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := srv.Client(t)
	ends := &endsOnItsWay{shas: []string{plainScripts.release.Hash(), multiPlain.release.Hash()}}
	c.AddHook(ends)
	l := mustNew(t, c)
	defer l.Close()
	ctx := context.Background()

	lk, err := l.Acquire(ctx, "ends-on-its-way", Options{TTL: longLease})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if err := lk.Release(rctx); err != nil {
		t.Errorf("Release = %v; want nil: the release sent again freed the key", err)
	}
	cancel()
	if v, err := rdb.Get(ctx, l.RedisKey("ends-on-its-way")).Result(); err != redis.Nil {
		t.Errorf("the key holds %q (%v) after Release; want it free", v, err)
	}

	m, err := l.AcquireAll(ctx, []string{"ends-a", "ends-b"}, Options{TTL: longLease})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
	if err := m.Release(rctx); err != nil {
		t.Errorf("the set's Release = %v; want nil: the release sent again freed the keys", err)
	}
	cancel()
	for _, k := range []string{"ends-a", "ends-b"} {
		if v, err := rdb.Get(ctx, l.RedisKey(k)).Result(); err != redis.Nil {
			t.Errorf("%s holds %q (%v) after the set's Release; want it free", k, v, err)
		}
	}
	if n := ends.ended.Load(); n < 2 {
		t.Fatalf("%d releases met their context's end on the way; want both", n)
	}
}

// TestRefusedReleaseCostsUnderASecond: a holder lets go while Redis
// refuses its connections, so its release never arrives. Release returns
// ErrUnavailable, and the release goes on behind it, sent again until
// Redis answers: the live waiter of another Locker has the key soon after
// Redis takes connections again, for a Lock in either mode and for an
// AcquireAll's set, not the holder's 30 s lease. Two faults: connections
// accepted and reset at once for 300 ms (the dial succeeds), and a server
// down for 1.5 s, whose dials fail, so that go-redis, once a small pool's
// dials failed, stops dialling and tries again about once a second (its
// dial circuit breaker): the resends outlast it, bounded by the lease,
// not by a clean-up's second. (Before, a release was sent once, twice
// when its context ended on the way: the key stayed locked, for nobody,
// for the rest of its lease; with the resends bounded by a second, the
// server down for 1.5 s left it so too.)
func TestRefusedReleaseCostsUnderASecond(t *testing.T) {
	for _, fault := range []string{"reset", "down"} {
		for _, kind := range []string{"default", "fair", "set"} {
			t.Run(fault+"/"+kind, func(t *testing.T) { testRefusedRelease(t, fault, kind) })
		}
	}
}

// downBound is how soon after a server that was down listens again the
// live waiter must have the key: go-redis's next dial (about a second
// after its last failed one), a resend (at most a second apart by then),
// and the claim bound's room for a loaded machine.
const downBound = 2*time.Second + claimBound

func testRefusedRelease(t *testing.T, fault, kind string) {
	srv := redistest.Start(t)
	live := mustNew(t, srv.Client(t))
	defer live.Close()
	p, err := faultproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A small pool: go-redis stops dialling once as many dials failed.
	h := mustNew(t, srv.Client(t, func(o *redis.Options) { o.Addr, o.MaxRetries, o.PoolSize = p.Addr(), -1, 2 }))
	defer h.Close()
	ctx := context.Background()
	const key = "refused-release"
	o := Options{TTL: longLease, Wait: longLease, Fair: kind == "fair"}
	var release func(context.Context) error
	if kind == "set" {
		m, err := h.AcquireAll(ctx, []string{key, key + ":b"}, Options{TTL: longLease})
		if err != nil {
			t.Fatal(err)
		}
		release = m.Release
	} else {
		lk, err := h.Acquire(ctx, key, Options{TTL: longLease, Fair: o.Fair})
		if err != nil {
			t.Fatal(err)
		}
		release = lk.Release
	}
	got := queueWaiters(t, live, key, 1, o)
	if fault == "down" {
		if err := p.Down(true); err != nil {
			t.Fatal(err)
		}
	} else {
		p.Refuse(true)
		p.Reset()
	}
	if err := release(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Release while Redis refuses connections = %v; want ErrUnavailable", err)
	}
	bound := claimBound
	if fault == "down" {
		time.Sleep(1500 * time.Millisecond) // the release, sent again behind Release, fails to dial
		if err := p.Down(false); err != nil {
			t.Fatal(err)
		}
		bound = downBound
	} else {
		time.Sleep(300 * time.Millisecond) // the release, sent again behind Release, is reset
		p.Refuse(false)
	}
	liveWaiterWithin(t, got, time.Now(), bound, "Redis took connections again", "the released lock's lease").Release(ctx)
}
