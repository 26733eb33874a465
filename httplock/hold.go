package httplock

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
)

// ErrHoldExceeded is the cause of a handler's context cancelled because the
// request held its lock for WithMaxHold, and the error of the handler's
// writes after that.
var ErrHoldExceeded = errors.New("httplock: request held the lock past WithMaxHold")

// A Hold is one request's hold of a lock, taken by Guard.Hold: the lock,
// the context the handler runs with, the bound on how long it may hold the
// lock (WithMaxHold), and the release. Its methods are safe for concurrent
// use.
type Hold struct {
	g     *Guard
	r     *http.Request
	lock  *padlock.Lock
	ns    string
	start time.Time
	ctx   context.Context

	// With WithMaxHold only.
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	expired chan struct{} // closed when the timer's func has returned

	mu    sync.Mutex
	over  bool // the bound has passed
	begun bool // the handler began its response before the bound

	// Set at the bound, when the lock was detached (no longer renewed)
	// rather than released: the handler may still be running.
	detached bool
	own      padlock.Ownership
	lease    time.Duration // the lease the lock kept until the bound

	once sync.Once
	err  error // of the release
}

// Hold takes the lock on key, a key from Key, for r, as Acquire does, and
// returns the hold, or the problem to refuse r with. The caller must call
// the hold's Release when the handler returns (also when it panics). The
// lock names r's route (r.Pattern) and caller: Hold is HoldAs with
// Caller(r.Context(), r, r.Pattern).
//
// Unlike Acquire and Release, a Hold measures how long the request held
// the lock, for the Retry-After of later busy answers in its namespace,
// and ends the hold at WithMaxHold's bound.
func (g *Guard) Hold(r *http.Request, key string) (*Hold, *Problem) {
	return g.HoldAs(r, key, g.Caller(r.Context(), r, r.Pattern))
}

// HoldAs is Hold for a lock that names caller as who took it, as
// AcquireAs: a face whose router keeps the route elsewhere than r.Pattern
// passes Caller(ctx, r, route).
func (g *Guard) HoldAs(r *http.Request, key, caller string) (*Hold, *Problem) {
	lk, p := g.AcquireAs(r.Context(), key, caller)
	if p != nil {
		return nil, p
	}
	h := &Hold{g: g, r: r, lock: lk, ns: g.namespaceOf(key), start: time.Now()}
	if g.maxHold <= 0 {
		h.ctx = lk.Context(r.Context())
		return h, nil
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	h.ctx, h.cancel = lk.Context(ctx), cancel
	h.expired = make(chan struct{})
	h.timer = time.AfterFunc(g.maxHold, h.expire)
	return h, nil
}

// expire ends the hold at the bound: later writes are refused, the
// handler's context is cancelled, and the lock is no longer renewed. It is
// not released: the handler, which a slow client (or its own code) may keep
// running for as long as it likes, has not returned, and until it does
// nobody else may enter the key's section. Detached, the lock stays in
// Redis until its lease runs out, at most one lease from now, and whoever
// takes the key next has a greater fence, which rejects what the handler
// still writes to a fenced store. A request for the key meanwhile is busy,
// with a Retry-After up to the lease's end.
func (h *Hold) expire() {
	defer close(h.expired)
	h.mu.Lock()
	h.over = true
	h.mu.Unlock()
	h.cancel(ErrHoldExceeded)
	lease := h.lock.Lease()
	// Measured as held until its lease runs out, so that busy answers in
	// the namespace meanwhile say to retry then, not after the usual hold.
	h.g.holds.add(h.ns, time.Since(h.start)+lease)
	// A reentrant handle cannot be detached (the outer hold bounds the
	// lock), nor a lock already lost: those are released as usual.
	own, err := h.lock.Detach()
	if err != nil {
		return
	}
	h.mu.Lock()
	h.detached, h.own, h.lease = true, own, lease
	h.mu.Unlock()
}

// Lock returns the lock held (past WithMaxHold's bound, detached: ended,
// and no longer renewed).
func (h *Hold) Lock() *padlock.Lock { return h.lock }

// Context returns the context to run the handler with: the request's,
// carrying the lock (see padlock.Lock.Context), cancelled if the lock is
// lost or released, and at WithMaxHold's bound with cause ErrHoldExceeded.
func (h *Hold) Context() context.Context { return h.ctx }

// Begin reports whether the handler may still write its response, and
// marks the response begun when it may: false once WithMaxHold's bound has
// passed. A face's response writer calls it before each write (and
// discards the write on false), so that nothing the handler writes after
// the bound reaches the client.
func (h *Hold) Begin() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.over {
		return false
	}
	h.begun = true
	return true
}

// Exceeded reports whether WithMaxHold's bound has passed.
func (h *Hold) Exceeded() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.over
}

// Release lets the lock go as Guard.Release does (the request's own
// context may have ended) and records how long it was held; it stops
// WithMaxHold's timer, waiting for it if it is running. Call it when the
// handler has returned: past WithMaxHold's bound the lock is only detached
// (see WithMaxHold), and Release is what lets it go, if its lease has not
// run out by then (a lease that did is told to WithReleaseError's func as
// padlock.ErrNotHeld). Only the first call lets the lock go; later calls
// return its error.
func (h *Hold) Release() error {
	if h.timer != nil {
		if !h.timer.Stop() {
			<-h.expired
		}
		h.cancel(context.Canceled)
	}
	return h.release()
}

func (h *Hold) release() error {
	h.once.Do(func() {
		h.mu.Lock()
		over, detached, own, lease := h.over, h.detached, h.own, h.lease
		h.mu.Unlock()
		if !over { // past the bound, the hold was measured there
			h.g.holds.add(h.ns, time.Since(h.start))
		}
		if detached {
			h.err = h.releaseDetached(own, lease)
			return
		}
		h.err = h.g.Release(h.r, h.lock)
	})
	return h.err
}

// releaseDetached lets go the lock detached at the bound, now that the
// handler has returned: it takes it back with the Ownership (on a lease no
// longer than it had, nor than WithReleaseTimeout, not renewed, so that a
// release that fails leaves it locked no longer than that) and releases
// it. When its lease ran out meanwhile, Resume finds it gone: the error is
// padlock.ErrNotHeld, told to WithReleaseError's func.
func (h *Hold) releaseDetached(own padlock.Ownership, lease time.Duration) error {
	o := h.g.lock
	o.Wait, o.Retry, o.NoRenew = 0, nil, true
	o.TTL = min(lease, h.g.releaseTimeout)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.r.Context()), h.g.releaseTimeout)
	lk, err := h.g.locker.Resume(ctx, own, o)
	cancel()
	if err != nil {
		if h.g.releaseError != nil {
			h.g.releaseError(h.r, err)
		}
		return err
	}
	return h.g.Release(h.r, lk)
}

// Problem returns the answer to send when WithMaxHold's bound passed
// before the handler began its response (503, see WithMaxHold), or nil.
// The face calls it after the handler returned and Release.
func (h *Hold) Problem() *Problem {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.over || h.begun {
		return nil
	}
	p := newProblem(http.StatusServiceUnavailable, "the request held the lock for longer than allowed, and was ended", ErrHoldExceeded)
	p.RetryAfter = -1 // retrying the same request will take as long
	return p
}

// holdWriter is the net/http response writer of a Hold with a bound: it
// drops what the handler writes after the bound.
type holdWriter struct {
	http.ResponseWriter
	h *Hold
}

func (w *holdWriter) WriteHeader(code int) {
	if w.h.Begin() {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *holdWriter) Write(b []byte) (int, error) {
	if !w.h.Begin() {
		return 0, ErrHoldExceeded
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes when the underlying writer can (http.ResponseController
// finds it through Unwrap too).
func (w *holdWriter) Flush() {
	if w.h.Begin() {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (w *holdWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Writer returns w wrapped so that writes after WithMaxHold's bound are
// dropped (they return ErrHoldExceeded), or w itself without a bound. The
// net/http face gives it to the handler.
func (h *Hold) Writer(w http.ResponseWriter) http.ResponseWriter {
	if h.timer == nil {
		return w
	}
	return &holdWriter{ResponseWriter: w, h: h}
}
