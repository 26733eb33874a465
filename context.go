package padlock

import "context"

// ctxKey is the context key under which a guarded context carries its locks.
type ctxKey struct{}

// heldLocks is the chain of locks a context carries, innermost first.
type heldLocks struct {
	lock *Lock
	next *heldLocks
}

// Context returns a copy of parent that carries the lock and is cancelled as
// soon as the lock is released or lost; context.Cause then returns
// ErrReleased or ErrLockLost. Hand it to the code the lock guards, so that
// work stops when the lock is gone.
//
// The returned context makes the lock reentrant: Acquire through the same
// Locker for the same key with this context (or one derived from it) returns
// at once, without a Redis round trip, a handle whose Release does nothing;
// only the outermost handle's Release lets the lock go. FromContext returns
// the innermost lock such a context carries.
func (lk *Lock) Context(parent context.Context) context.Context {
	r := lk.root()
	ctx, cancel := context.WithCancelCause(parent)
	stop := r.guard(cancel)
	// Forget ctx once it ends for another reason, so a long-held lock does
	// not collect one entry per request context.
	context.AfterFunc(ctx, stop)
	next, _ := parent.Value(ctxKey{}).(*heldLocks)
	return context.WithValue(ctx, ctxKey{}, &heldLocks{lock: lk, next: next})
}

// FromContext returns the innermost lock ctx carries (see Lock.Context), or
// nil when it carries none.
func FromContext(ctx context.Context) *Lock {
	if h, _ := ctx.Value(ctxKey{}).(*heldLocks); h != nil {
		return h.lock
	}
	return nil
}

// reentrant returns a new handle on the lock ctx already carries for key
// through l, or nil when it carries none that is still held.
func (l *Locker) reentrant(ctx context.Context, key string) *Lock {
	h, _ := ctx.Value(ctxKey{}).(*heldLocks)
	for ; h != nil; h = h.next {
		if r := h.lock.root(); r.locker == l && r.key == key && r.Err() == nil {
			return &Lock{outer: r}
		}
	}
	return nil
}
