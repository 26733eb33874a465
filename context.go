package padlock

import "context"

// ctxKey is the context key under which a guarded context carries its locks.
type ctxKey struct{}

// guardedCtx is a context from Lock.Context: a cancellable copy of its
// parent that carries the lock. It is also a link in the chain of locks the
// context carries, innermost first, and the lock's handle to cancel it.
// Embedding the *cancelCtx keeps the standard library's fast paths: contexts
// derived from it register with that cancelCtx instead of starting a
// goroutine to watch it.
type guardedCtx struct {
	context.Context
	lock   *Lock
	next   *guardedCtx // the lock the parent carried, if any
	cancel context.CancelCauseFunc
}

func (g *guardedCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return g
	}
	return g.Context.Value(key)
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
	ctx, cancel := context.WithCancelCause(parent)
	next, _ := parent.Value(ctxKey{}).(*guardedCtx)
	g := &guardedCtx{Context: ctx, lock: lk, next: next, cancel: cancel}
	lk.root().guard(g)
	return g
}

// FromContext returns the innermost lock ctx carries (see Lock.Context), or
// nil when it carries none.
func FromContext(ctx context.Context) *Lock {
	if g, _ := ctx.Value(ctxKey{}).(*guardedCtx); g != nil {
		return g.lock
	}
	return nil
}

// reentrant returns a new handle on the lock ctx already carries for key
// through l, or nil when it carries none that is still held.
func (l *Locker) reentrant(ctx context.Context, key string) *Lock {
	g, _ := ctx.Value(ctxKey{}).(*guardedCtx)
	for ; g != nil; g = g.next {
		if r := g.lock.root(); r.locker == l && r.key == key && r.id.kind == holdMutex && r.Err() == nil {
			return &Lock{outer: r}
		}
	}
	return nil
}
