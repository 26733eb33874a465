package padlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Lock is a held lock. Its owner must call Release when done; until then the
// lease is renewed in the background unless Options.NoRenew was set. Done
// closes, and contexts from Context are cancelled, when the lock is released
// or lost. Methods are safe for concurrent use.
type Lock struct {
	// outer is the handle that took the lock in Redis; it is nil on that
	// handle itself. A reentrant Acquire returns a handle pointing at it.
	outer *Lock
	// released and obsState share one word: every lock cycle allocates a
	// Lock, and a few bytes more would move it up a size class (see
	// TestLockSizeClass).
	released atomic.Bool  // this handle's Release ran
	obsState atomic.Int32 // whether its end is yet to be observed (obs_observer.go)

	locker *Locker
	key    string
	id     *lockID
	fence  int64
	// fenceEnd is the last fence reserved with the Redis lock: the lock may
	// be handed on locally while fence < fenceEnd (see wait_handoff.go).
	fenceEnd int64

	// lease is the lock's lease in Redis, which the watchdog keeps (see
	// lease.go). A lock taken from Redis keeps it in own; a hand-off moves
	// it on to the next holder.
	lease *lease
	own   lease

	since time.Time // when this holder got the lock

	mu      sync.Mutex
	end     error // nil while held; ErrReleased or ErrLockLost after
	ctx     context.Context
	cancel  context.CancelCauseFunc
	guarded []*guardedCtx // contexts from Context, cancelled in finish
}

// newLock returns the Lock an acquire sent at sent, whose reply came at
// answered, took with fence.
func newLock(l *Locker, key string, id *lockID, fence int64, o Options, sent, answered time.Time) *Lock {
	lk := &Lock{locker: l, key: key, id: id, fence: fence, since: answered}
	lk.own.init(id, lk, o.TTL, !o.NoRenew, sent, answered, l.watchdog.margin)
	lk.lease = &lk.own
	return lk
}

// root returns the handle that owns the lock in Redis.
func (lk *Lock) root() *Lock {
	if lk.outer != nil {
		return lk.outer
	}
	return lk
}

// Key returns the key the lock was acquired for, as passed to Acquire.
func (lk *Lock) Key() string { return lk.root().key }

// Token returns the random owner token stored in Redis for this lock's
// grant, followed by "~" and Options.Owner and Caller when either was
// set. Every grant has its own: each attempt that takes the lock, each
// hand-off within a Locker (see Release) and each Resume, so nothing sent
// under an earlier grant can touch this one. (Redis stores it followed by "|" and the
// number of the last lease change, and "*" once a waiter asked for a
// release notice.)
func (lk *Lock) Token() string { return lk.root().id.token }

// Fence returns the lock's fencing token: strictly greater than the fence of
// every earlier holder of the same key on the same Redis deployment. Pass it
// to the store the lock protects and have the store reject writes carrying a
// fence lower than the highest it has seen. On a Redlock Locker it is 0:
// counters on independent nodes give no sequence that only grows (see
// "Redlock" in the package documentation).
func (lk *Lock) Fence() int64 {
	if r := lk.root(); r.locker != nil && !r.locker.cfg.redlock {
		return r.fence
	}
	return 0
}

// Done returns a channel that is closed when the lock is released or lost.
// Err then says which.
func (lk *Lock) Done() <-chan struct{} { return lk.root().context().Done() }

// Err returns nil while the lock is held, ErrReleased after its owner
// released it (or handed it over, see Detach), and ErrLockLost after it was
// lost. A Lock that no Acquire returned (the zero value) never held
// anything: its Err is ErrNotHeld, and its Done is closed.
//
// Err tells that a lock is lost as soon as its trusted lease has run out,
// even before the watchdog has woken to close Done: code that checks Err
// before each step of its work never goes on past that moment.
func (lk *Lock) Err() error {
	r := lk.root()
	if r.locker == nil {
		return ErrNotHeld
	}
	r.mu.Lock()
	end := r.end
	r.mu.Unlock()
	if end == nil && r.lease.expired() {
		// The watchdog, which may not have woken yet, stops renewing it
		// when it next looks (watchdog.ended).
		r.lost(LostExpired)
		return r.Err()
	}
	return end
}

// context returns the lock's own context, cancelled with the cause in end
// when the lock ends. It is made on first use, so locks that nobody watches
// cost nothing for it.
func (lk *Lock) context() context.Context {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.ctx == nil {
		lk.ctx, lk.cancel = context.WithCancelCause(context.Background())
		if lk.locker == nil {
			lk.cancel(ErrNotHeld) // the zero Lock: never held
		}
		if lk.end != nil {
			lk.cancel(lk.end)
		}
	}
	return lk.ctx
}

// finish marks the lock ended with cause and reports whether this call did
// so (false when it had ended already).
func (lk *Lock) finish(cause error) bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.end != nil {
		return false
	}
	lk.end = cause
	// Cancel the guarded contexts here, not from a callback goroutine, and
	// before Done closes: whoever sees Done closed finds them cancelled too.
	for _, g := range lk.guarded {
		g.cancel(cause)
	}
	lk.guarded = nil
	if lk.cancel != nil {
		lk.cancel(cause)
	}
	return true
}

// guard makes finish cancel g, or cancels it now if the lock has ended.
// Contexts that ended on their own are dropped whenever the list would
// grow, so a long-held lock does not collect one per request.
func (lk *Lock) guard(g *guardedCtx) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.end != nil {
		g.cancel(lk.end)
		return
	}
	if len(lk.guarded) == cap(lk.guarded) {
		live := lk.guarded[:0]
		for _, x := range lk.guarded {
			if x.Err() == nil {
				live = append(live, x)
			}
		}
		clear(lk.guarded[len(live):])
		lk.guarded = live
	}
	lk.guarded = append(lk.guarded, g)
}

// unguard cancels, with ErrReleased, the contexts made from handle h.
func (lk *Lock) unguard(h *Lock) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	live := lk.guarded[:0]
	for _, g := range lk.guarded {
		if g.lock == h {
			g.cancel(ErrReleased)
		} else {
			live = append(live, g)
		}
	}
	clear(lk.guarded[len(live):])
	lk.guarded = live
}

// Release lets the lock go. It returns ErrNotHeld when the lock was already
// lost (its lease ran out and maybe someone else took the key; the error
// matches ErrLockLost too), and an ErrUnavailable error when Redis could
// not be reached, or when the release was sent again after its connection
// closed and found the lock gone: behind a proxy or load balancer the copy
// sent first may have run, so whether it released the lock or found it
// lost cannot be told. Either way the lock is no longer renewed. A ctx
// that is done, or that ends as the release goes out, does not keep the
// key locked for the rest of the lease: the release is then sent (again)
// on a context of its own, for at most a second. Nor does a release that
// Redis did not answer (a refused connection, a reset): Release returns
// its ErrUnavailable error once the client gives up, and the release goes
// on behind it, sent again until Redis answers or until the lease would
// have ended anyway. An error reply (LOADING, READONLY after a failover)
// is an answer, and is not sent again; nor is anything after the Locker
// is closed.
// Release is safe on a nil Lock and when called twice (later calls
// return nil). Releasing a reentrant handle (see Context) ends the
// contexts made from that handle (ErrReleased) and nothing else; the
// outermost handle releases the lock. When an Acquire of the same Locker
// is waiting for the key, Release may hand the lock straight to it, after
// one round trip that confirms Redis still holds the lock; the waiter's
// Lock then has the next fence. A fair lock (Options.Fair) is handed on
// so only to the oldest waiter in the key's queue, when that waiter is in
// the same Locker; otherwise the same round trip releases it.
func (lk *Lock) Release(ctx context.Context) error {
	if lk == nil || lk.released.Swap(true) {
		return nil
	}
	if lk.outer == nil && lk.locker == nil {
		return ErrNotHeld // the zero Lock: never held
	}
	if lk.outer != nil {
		// The handle's scope is over: contexts made from it end now; the
		// outer lock goes on.
		lk.outer.unguard(lk)
		return nil
	}
	var (
		handed    bool
		g         giveBack
		next      *lockID
		renameErr error // the rename's reply was lost: it may have run
	)
	id := lk.id // the grant the release names
	releasing := time.Now()
	if id.kind == holdMutex && id.fair {
		return lk.releaseFair(ctx, releasing)
	}
	if id.kind == holdMutex { // holds are never handed on (store_hold.go)
		handed, g, next = lk.locker.handOff(lk, releasing, nil)
	}
	if next != nil {
		// A local waiter is next. The hand-off is a grant of its own: move
		// the lock in Redis to next's token, which also confirms that
		// Redis still holds it, so that a lock Redis lost (a restart, a
		// failover) is never passed on (see wait_handoff.go).
		if f := lk.locker.confirming; f != nil {
			f()
		}
		switch err := lk.locker.rename(ctx, lk, next); {
		case errors.Is(err, ErrNotHeld):
			return err // lost, and finished as such
		case err == nil:
			id = next // Redis holds the lock under next's token now
			handed, g, _ = lk.locker.handOff(lk, releasing, next)
		default:
			// next's token, if the rename ran, was let go (rename); the
			// lock may still be under lk's.
			renameErr = err
		}
	}
	if handed { // and lk finished
		lk.observeReleased(true, nil)
		return nil
	}
	return lk.letGo(ctx, id, g, renameErr)
}

// letGo gives the lock lk held back to Redis, as g says, under the grant
// id: lk's own, or the one a hand-off that did not complete moved it to.
// renameErr is the error of such a hand-off whose reply was lost.
func (lk *Lock) letGo(ctx context.Context, id *lockID, g giveBack, renameErr error) error {
	// Even a lock already judged lost (its renewals went unanswered, or the
	// Locker was closed) may still be ours in Redis: ask, so the key does
	// not stay locked for the rest of its lease.
	lk.locker.watchdog.remove(lk.lease)
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	if g.bid != nil {
		g.bid.sent = time.Now()
		defer lk.locker.bidPlaced(id.lockKey(), g.bid)
	}
	ok, err := lk.locker.store.release(ctx, id, g)
	heard := redisAnswered(err)
	// Sent again without the bid, whose token the first send spent (its
	// fate is bidPlaced's): the release alone frees the key.
	again := func(ctx context.Context) (bool, error) {
		return lk.locker.store.release(ctx, id, giveBack{notify: true})
	}
	if endedOnItsWay(ctx, err) {
		rctx, rcancel := cleanupContext(ctx)
		held, aerr := again(rctx)
		if aerr == nil && held {
			ok, err = true, nil
		}
		heard = redisAnswered(aerr)
		rcancel()
	}
	if !heard {
		// No send was answered: the release may never have reached
		// Redis (a refused connection, a reset), and the key would stay
		// locked, for nobody, for the rest of its lease. It goes on
		// behind the caller, which hears the error now, until Redis
		// answers or the lease would have ended.
		lk.locker.resendRelease(ctx, time.Now().Add(lk.Lease()), func(ctx context.Context) error {
			_, err := again(ctx)
			return err
		})
	}
	switch {
	case err != nil:
		err = unavailable("release", err)
		if lk.finish(ErrReleased) {
			lk.observeReleased(false, err)
		}
		return err
	case !ok && renameErr != nil:
		// Gone from lk's token: the rename may have moved it, and its
		// clean-up let it go; not known to be lost.
		if lk.finish(ErrReleased) {
			lk.observeReleased(false, renameErr)
		}
		return renameErr
	case !ok:
		lk.lost(LostTokenGone)
		return errLost
	}
	if lk.finish(ErrReleased) {
		lk.observeReleased(false, nil)
	}
	return nil
}

// Extend resets the lock's lease to ttl from now, and makes ttl the lease
// that later renewals keep. It returns ErrNotHeld when the lock was lost or
// released, changing nothing (when lost, the error matches ErrLockLost too), and an ErrUnavailable error when Redis did
// not answer. The command may still have run then (or may run later, when
// a stalled server resumes), so the lock is kept as if it had: a shorter
// lease is trusted from the moment Extend is called, whatever comes back,
// and the lost signal fires by its end unless renewals confirm the lock.
// Concurrent Extends are allowed; the lock trusts the shortest lease any of
// them may have left in Redis, and renewals keep the ttl of the one called
// last.
func (lk *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return invalid("ttl", "must be at least 1ms, got %v", ttl)
	}
	r := lk.root()
	if err := r.Err(); err != nil {
		return notHeld(err)
	}
	if err := r.locker.cfg.checkLease("ttl", ttl); err != nil {
		return err
	}
	if f := r.locker.extending; f != nil {
		f()
	}
	return r.locker.resetLease(ctx, r, ttl, true)
}

// resetLease sets lk's lease in Redis to ttl from now (0: the lease the
// renewals keep) if lk's token still holds the lock, telling the watchdog
// before the command is sent and when its outcome is known (lease.go);
// setTTL makes ttl the lease renewals keep.
// It returns ErrNotHeld, having ended the lock as lost, when the token no
// longer holds it, and an ErrUnavailable error when Redis did not answer:
// the change may have run, and the lease is trusted as if it had.
func (l *Locker) resetLease(ctx context.Context, lk *Lock, ttl time.Duration, setTTL bool) error {
	ls := lk.lease
	seq, ttl, ok := l.watchdog.begin(ls, lk, ttl, setTTL)
	if !ok {
		return ErrNotHeld // handed on (the next holder's lease is not ours to change), or let go
	}
	ok, err := l.store.extend(ctx, lk.id, ttl, seq)
	switch {
	case err != nil:
		l.watchdog.settle(ls, seq, false)
		return unavailable("extend", err)
	case !ok:
		// Nothing left to renew, or to hand on, whoever holds it now.
		l.watchdog.gone(ls, lk.id)
		lk.lost(LostTokenGone)
		return errLost
	}
	l.watchdog.settle(ls, seq, true)
	return nil
}

// rename moves the lock lk holds in Redis to the grant next
// (lua/handover.lua), resetting its lease as a renewal does: from then on
// renewals name next's token. It returns ErrNotHeld, having ended lk as
// lost, when lk's token no longer holds the lock, and an ErrUnavailable
// error when Redis did not answer (the lock may be under either token).
func (l *Locker) rename(ctx context.Context, lk *Lock, next *lockID) error {
	ls := lk.lease
	seq, ttl, ok := l.watchdog.begin(ls, lk, 0, false)
	if !ok {
		return ErrNotHeld
	}
	ok, err := l.store.handover(ctx, lk.id, next, ttl, seq)
	switch {
	case err != nil:
		l.watchdog.settle(ls, seq, false)
		// Whichever token holds the lock now, let it go: next's here,
		// sent again behind the caller until Redis answers (or next's
		// lease would have ended); lk's in letGo.
		l.releaseAnswered(ctx, time.Now().Add(ttl), func(ctx context.Context) error {
			_, err := l.store.release(ctx, next, giveBack{notify: true})
			return err
		})
		return unavailable("release", err)
	case !ok:
		l.watchdog.gone(ls, lk.id)
		lk.lost(LostTokenGone)
		return errLost
	}
	l.watchdog.renamed(ls, seq, next)
	return nil
}

// releaseFair is Release of a fair lock. When the oldest waiter in the
// key's queue waits in this Locker, the lock is handed on to it as
// Release hands a lock on to a local waiter, in the one round trip that
// confirms Redis still holds the lock and checks that it is that
// waiter's turn (lua/handover_fair.lua); when the head waits elsewhere,
// that round trip releases the lock (see wait_handoff.go).
func (lk *Lock) releaseFair(ctx context.Context, releasing time.Time) error {
	l := lk.locker
	w, next := l.fairCandidate(lk)
	if w == nil {
		return lk.letGo(ctx, lk.id, giveBack{}, nil)
	}
	if f := l.confirming; f != nil {
		f()
	}
	fence, released, err := l.renameFair(ctx, lk, next, w.a.at.place)
	switch {
	case errors.Is(err, ErrNotHeld):
		return err // lost, and finished as such
	case err != nil:
		// next's token, if the hand-off ran, was let go (renameFair), and
		// w's place in the queue with it: w asks to be queued again. The
		// lock may still be under lk's token.
		l.requeueFair(w)
		return lk.letGo(ctx, lk.id, giveBack{}, err)
	case released: // the head of the queue waits elsewhere
		l.watchdog.remove(lk.lease)
		if lk.finish(ErrReleased) {
			lk.observeReleased(false, nil)
		}
		return nil
	}
	if l.handFair(lk, w, next, fence, releasing) { // and lk finished
		lk.observeReleased(true, nil)
		return nil
	}
	// Redis holds the lock under next's token, but w cannot take it.
	return lk.letGo(ctx, next, giveBack{}, nil)
}

// renameFair moves the lock lk holds in Redis to the grant next of the
// fair waiter queued as place, if that waiter is the head of the key's
// queue, as rename does, and returns next's fence; or, when the head is
// another waiter, releases it (released). Its errors are rename's.
func (l *Locker) renameFair(ctx context.Context, lk *Lock, next *lockID, place string) (fence int64, released bool, err error) {
	ls := lk.lease
	seq, ttl, ok := l.watchdog.begin(ls, lk, 0, false)
	if !ok {
		return 0, false, ErrNotHeld
	}
	fence, released, err = l.store.handoverFair(ctx, lk.id, next, place, ttl, seq)
	switch {
	case err != nil:
		l.watchdog.settle(ls, seq, false)
		// If the hand-off ran, next's token holds the lock: let it go,
		// behind the caller, until Redis answers (or next's lease would
		// have ended).
		l.releaseAnswered(ctx, time.Now().Add(ttl), func(ctx context.Context) error {
			_, err := l.store.release(ctx, next, giveBack{})
			return err
		})
		return 0, false, unavailable("release", err)
	case released:
		return 0, true, nil
	case fence == 0:
		l.watchdog.gone(ls, lk.id)
		lk.lost(LostTokenGone)
		return 0, false, errLost
	}
	l.watchdog.renamed(ls, seq, next)
	return fence, false, nil
}

// TTL returns the lock's remaining lease as Redis sees it, or ErrNotHeld
// when the lock is no longer held by this owner (matching ErrLockLost too
// when it was lost rather than released).
func (lk *Lock) TTL(ctx context.Context) (time.Duration, error) {
	r := lk.root()
	if err := r.Err(); err != nil {
		return 0, notHeld(err)
	}
	d, ok, err := r.locker.store.pttl(ctx, r.id)
	switch {
	case err != nil:
		return 0, unavailable("ttl", err)
	case !ok:
		r.locker.watchdog.gone(r.lease, r.id) // nothing left to renew, or to hand on
		r.lost(LostTokenGone)
		return 0, errLost
	}
	return d, nil
}

// Lease returns the lease the lock keeps in Redis while it is renewed: the
// TTL it was acquired with, or the last Extend's. No round trip.
func (lk *Lock) Lease() time.Duration {
	r := lk.root()
	if r.locker == nil {
		return 0
	}
	w := r.locker.watchdog
	w.mu.Lock()
	defer w.mu.Unlock()
	return r.lease.ttl
}

// ValidUntil returns the moment until which the lock is surely held: its
// lease's earliest possible end in Redis, less the drift margin, as far as
// the renewals, Extends and acquire confirmed so far tell (redsync calls
// this Until). The lost signal fires then unless a renewal moves it on.
// It is zero once the lock was released or lost. No round trip.
func (lk *Lock) ValidUntil() time.Time {
	r := lk.root()
	if r.Err() != nil {
		return time.Time{}
	}
	w := r.locker.watchdog
	w.mu.Lock()
	defer w.mu.Unlock()
	return r.lease.validUntil
}
