package httplock

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
)

// A Hold is one request's hold of a lock, taken by Guard.Hold: the lock,
// the context the handler runs with, and the release. Its methods are safe
// for concurrent use.
type Hold struct {
	g     *Guard
	r     *http.Request
	lock  *padlock.Lock
	ns    string
	start time.Time
	ctx   context.Context

	once sync.Once
	err  error // of the release
}

// Hold takes the lock on key, a key from Key, for r, as Acquire does, and
// returns the hold, or the problem to refuse r with. The caller must call
// the hold's Release when the handler returns (also when it panics).
//
// Unlike Acquire and Release, a Hold measures how long the request held
// the lock, for the Retry-After of later busy answers in its namespace.
func (g *Guard) Hold(r *http.Request, key string) (*Hold, *Problem) {
	lk, p := g.Acquire(r.Context(), key)
	if p != nil {
		return nil, p
	}
	h := &Hold{g: g, r: r, lock: lk, ns: g.namespaceOf(key), start: time.Now()}
	h.ctx = lk.Context(r.Context())
	return h, nil
}

// Lock returns the lock held.
func (h *Hold) Lock() *padlock.Lock { return h.lock }

// Context returns the context to run the handler with: the request's,
// carrying the lock (see padlock.Lock.Context), cancelled if the lock is
// lost or released.
func (h *Hold) Context() context.Context { return h.ctx }

// Release lets the lock go as Guard.Release does (the request's own
// context may have ended) and records how long it was held. Only the
// first call releases; later ones return its error.
func (h *Hold) Release() error {
	h.once.Do(func() {
		h.g.holds.add(h.ns, time.Since(h.start))
		h.err = h.g.Release(h.r, h.lock)
	})
	return h.err
}
