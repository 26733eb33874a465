package padlock

import (
	"context"
	"time"
)

// Ownership is what it takes to hold a lock that another Lock value took:
// its key, its owner token and its fence. Detach gives it up from one
// process; Resume takes the lock over with it in another (or in the same
// one, later), for a lock taken when a job is queued and released by the
// worker that finishes the job. It marshals to JSON as is.
//
// The token is the lock's secret: whoever has it can extend and release
// the lock. Pass it only to the code that is meant to own the lock.
type Ownership struct {
	Key   string `json:"key"`   // the lock key, as passed to Acquire
	Token string `json:"token"` // the owner token (Lock.Token): the secret
	Fence int64  `json:"fence"` // the lock's fence (Lock.Fence)
}

// Detach stops renewing and watching lk without releasing it, and returns
// the Ownership that Locker.Resume needs to take the lock over. The lock
// stays in Redis until its lease ends, unless someone resumes it first:
// take it with a TTL that covers the hand-over (the queueing of a job, for
// instance), or the lock may expire before it is resumed. lk ends as if
// released: Done closes and Err returns ErrReleased; its Release does
// nothing. Waiters of lk's Locker are not handed the lock; they wait for
// its release like waiters elsewhere.
//
// It returns ErrNotHeld when lk no longer holds the lock (matching
// ErrLockLost too when it was lost), and an ErrInvalid error for a handle
// from a reentrant Acquire (detach the outermost one) and for a semaphore
// permit or a read-write hold, which only their Release lets go.
func (lk *Lock) Detach() (Ownership, error) {
	if lk != nil && lk.outer != nil {
		return Ownership{}, invalid("Detach", "a reentrant handle cannot give up the lock its outer handle holds")
	}
	if lk == nil || lk.released.Load() {
		return Ownership{}, ErrNotHeld
	}
	if err := lk.Err(); err != nil {
		return Ownership{}, notHeld(err)
	}
	if lk.id.kind != holdMutex {
		return Ownership{}, invalid("Detach", "only a mutex can be detached, not a semaphore permit or a read-write hold")
	}
	own := Ownership{Key: lk.key, Token: lk.id.token, Fence: lk.Fence()}
	lk.locker.watchdog.remove(lk.lease)
	if !lk.finish(ErrReleased) {
		return Ownership{}, notHeld(lk.Err()) // lost or released meanwhile
	}
	lk.released.Store(true)
	lk.observeReleased(true, nil) // handed on, to whoever resumes it
	return own, nil
}

// Resume takes over the lock that own describes (see Detach): in one step
// in Redis it checks that own's token still holds own's key, gives the
// lock a new token, and resets the lease to o.TTL. It returns a Lock that
// the Locker renews (unless o.NoRenew) and whose owner must Release it, as
// one from Acquire. o.Wait and o.Retry do not apply; o.Fair must be what
// the lock was acquired with, so that its release wakes the right waiter.
// The Lock's Fence is own.Fence; its Token is the new one.
//
// An Ownership resumes once: a second Resume of it (a job delivered twice)
// returns ErrNotHeld, and so does anything the detached lock still had on
// its way to Redis. Resume returns ErrNotHeld too when the token no longer
// holds the key (its lease ran out, or it was released); an ErrUnavailable
// error when Redis could not be reached (the hand-over may then have
// happened, and the lock expires with its lease) or answered only after
// the new lease had run out (the lock is let go); and an ErrInvalid error
// for an empty key or token or invalid Options.
func (l *Locker) Resume(ctx context.Context, own Ownership, o Options) (*Lock, error) {
	switch {
	case own.Key == "":
		return nil, invalid("Ownership.Key", "must not be empty")
	case own.Token == "":
		return nil, invalid("Ownership.Token", "must not be empty")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if l.watchdog.isClosed() {
		return nil, ErrClosed
	}
	o = o.withDefaults(l.defaults)
	if err := l.cfg.checkLease("Options.TTL", o.TTL); err != nil {
		return nil, err
	}
	// The lock goes on under a token of its own: whatever still carries
	// the old one (a renewal or Extend of the detached lock on its way, a
	// second Resume of the same Ownership) no longer matches it.
	id := mintID(l.keys, own.Key, o)
	id.claim() // minted just now: the first claim
	sent := time.Now()
	ok, err := l.store.resume(ctx, own.Token, id)
	switch {
	case err != nil:
		return nil, unavailable("resume", err)
	case !ok:
		return nil, ErrNotHeld
	}
	replied := time.Now()
	if !replied.Before(sent.Add(o.TTL - l.cfg.margin(o.TTL))) {
		// Taken over, but the reply came after the lease it trusts had
		// run out (as acquisition.try): let it go rather than return a
		// lock that is lost already.
		l.cleanup(ctx, id)
		return nil, unavailable("resume", errLateGrant)
	}
	lk := newLock(l, own.Key, id, own.Fence, o, sent, replied)
	lk.fenceEnd = own.Fence // no fences reserved: never handed on
	if !l.watchdog.add(lk.lease) {
		return nil, ErrClosed
	}
	return lk, nil
}
