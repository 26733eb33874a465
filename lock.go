package padlock

import (
	"context"
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
	outer    *Lock
	released atomic.Bool // this handle's Release ran

	locker *Locker
	key    string
	id     *lockID
	fence  int64
	// fenceEnd is the last fence reserved with the Redis lock: the lock may
	// be handed on locally while fence < fenceEnd (see handoff.go).
	fenceEnd int64

	renew bool // the watchdog extends the lease while the lock is held

	// Guarded by the Locker's watchdog.mu.
	ttl        time.Duration // current lease length
	validUntil time.Time     // monotonic: the lease surely runs until then
	renewBase  time.Time     // when the last acquire or extend was sent
	renewAt    time.Time     // when the next renewal is due
	due        time.Time     // the watchdog's next event for this lock
	inFlight   bool          // a renewal is on its way
	extends    uint64        // Extend calls so far
	wdIndex    int           // position in the watchdog's heap, -1 if absent
	successor  *Lock         // the handle the lock was handed on to, if any

	mu      sync.Mutex
	end     error // nil while held; ErrReleased or ErrLockLost after
	ctx     context.Context
	cancel  context.CancelCauseFunc
	guarded []*guardedCtx // contexts from Context, cancelled in finish
}

func newLock(l *Locker, key string, id *lockID, fence int64, o Options, sent time.Time) *Lock {
	return &Lock{
		locker:     l,
		key:        key,
		id:         id,
		fence:      fence,
		ttl:        o.TTL,
		renew:      !o.NoRenew,
		validUntil: sent.Add(o.TTL - l.cfg.margin(o.TTL)),
		renewBase:  sent,
		wdIndex:    -1,
	}
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

// Token returns the random owner token stored in Redis for this lock (the
// stored value may carry a "*" suffix: a waiter asked for a release
// notice). A lock handed on within its Locker (see Release) keeps the token
// it was taken with; Fence tells its holders apart.
func (lk *Lock) Token() string { return lk.root().id.token }

// Fence returns the lock's fencing token: strictly greater than the fence of
// every earlier holder of the same key on the same Redis deployment. Pass it
// to the store the lock protects and have the store reject writes carrying a
// fence lower than the highest it has seen. On a Redlock Locker it is 0:
// counters on independent nodes give no sequence that only grows (see
// NewRedlock).
func (lk *Lock) Fence() int64 {
	if r := lk.root(); !r.locker.cfg.redlock {
		return r.fence
	}
	return 0
}

// Done returns a channel that is closed when the lock is released or lost.
// Err then says which.
func (lk *Lock) Done() <-chan struct{} { return lk.root().context().Done() }

// Err returns nil while the lock is held, ErrReleased after its owner
// released it, and ErrLockLost after it was lost.
func (lk *Lock) Err() error {
	r := lk.root()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

// context returns the lock's own context, cancelled with the cause in end
// when the lock ends. It is made on first use, so locks that nobody watches
// cost nothing for it.
func (lk *Lock) context() context.Context {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.ctx == nil {
		lk.ctx, lk.cancel = context.WithCancelCause(context.Background())
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
	if lk.cancel != nil {
		lk.cancel(cause)
	}
	// Cancel the guarded contexts here, not from a callback goroutine: when
	// Done is closed, they are already cancelled too.
	for _, g := range lk.guarded {
		g.cancel(cause)
	}
	lk.guarded = nil
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
// lost (its lease ran out and maybe someone else took the key), and an
// ErrUnavailable error when Redis could not be reached; either way the lock
// is no longer renewed. Release is safe on a nil Lock and when called twice
// (later calls return nil). Releasing a reentrant handle (see Context) ends
// the contexts made from that handle (ErrReleased) and nothing else; the
// outermost handle releases the lock. When an Acquire of the same Locker
// is waiting for the key, Release may hand the lock straight to it without
// a Redis round trip; the waiter's Lock then has the next fence.
func (lk *Lock) Release(ctx context.Context) error {
	if lk == nil || lk.released.Swap(true) {
		return nil
	}
	if lk.outer != nil {
		// The handle's scope is over: contexts made from it end now; the
		// outer lock goes on.
		lk.outer.unguard(lk)
		return nil
	}
	handed, g := lk.locker.handOff(lk)
	if handed { // and lk finished
		return nil
	}
	// Even a lock already judged lost (its renewals went unanswered, or the
	// Locker was closed) may still be ours in Redis: ask, so the key does
	// not stay locked for the rest of its lease.
	lk.locker.watchdog.remove(lk)
	ok, err := lk.locker.store.release(ctx, lk.id, g)
	switch {
	case err != nil:
		lk.finish(ErrReleased)
		return unavailable("release", err)
	case !ok:
		lk.finish(ErrLockLost)
		return ErrNotHeld
	}
	lk.finish(ErrReleased)
	return nil
}

// Extend resets the lock's lease to ttl from now, and makes ttl the lease
// that later renewals keep. It returns ErrNotHeld when the lock was lost or
// released, changing nothing.
func (lk *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return invalid("ttl", "must be at least 1ms, got %v", ttl)
	}
	r := lk.root()
	if err := r.locker.cfg.checkLease("ttl", ttl); err != nil {
		return err
	}
	if r.Err() != nil {
		return ErrNotHeld
	}
	sent := time.Now()
	ok, err := r.locker.store.extend(ctx, r.id, ttl)
	switch {
	case err != nil:
		return unavailable("extend", err)
	case !ok:
		r.locker.watchdog.remove(r) // nothing left to renew, or to hand on
		r.finish(ErrLockLost)
		return ErrNotHeld
	}
	r.locker.watchdog.extended(r, ttl, sent)
	return nil
}

// TTL returns the lock's remaining lease as Redis sees it, or ErrNotHeld
// when the lock is no longer held by this owner.
func (lk *Lock) TTL(ctx context.Context) (time.Duration, error) {
	r := lk.root()
	if r.Err() != nil {
		return 0, ErrNotHeld
	}
	d, ok, err := r.locker.store.pttl(ctx, r.id)
	switch {
	case err != nil:
		return 0, unavailable("ttl", err)
	case !ok:
		r.locker.watchdog.remove(r) // nothing left to renew, or to hand on
		r.finish(ErrLockLost)
		return 0, ErrNotHeld
	}
	return d, nil
}
