package httplock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/keyprobe"
	"github.com/padlockgo/padlock/internal/refusal"
	"github.com/padlockgo/padlock/internal/who"
	"github.com/padlockgo/padlock/lockkey"
)

// Guard is what every face of the lock middleware does around a handler:
// namespace the key, take the lock, refuse a request that cannot have it,
// release it afterwards. Lock is built on it, and so is the Gin middleware
// (padlock/middleware); an adapter for another router can be too:
//
//	g := httplock.NewGuard(locker, opts...)
//	if g.Skip(r) { /* run the handler */ }
//	h, p := g.HoldAs(r, g.Key(route, key), g.Caller(r.Context(), r, route))
//	if p != nil { g.Refuse(w, r, p); return }
//	defer h.Release()
//	/* run the handler with r.WithContext(h.Context()) */
//
// A Guard is safe for concurrent use.
type Guard struct {
	locker *padlock.Locker
	config
	nsPrefix string // escaped namespace and Sep, when namespaceSet

	mu       sync.RWMutex
	routeNS  map[string]string // route template -> escaped namespace and Sep
	known    map[string]bool   // escaped namespaces of routeNS, for namespace
	routeWho map[string]string // route template -> Caller without a caller

	holds holdTimes // for the Retry-After of busy answers
}

// NewGuard returns a Guard taking locks from l, configured by opts as Lock
// is. It panics if l is nil or an option is invalid.
func NewGuard(l *padlock.Locker, opts ...Option) *Guard {
	return newGuard("NewGuard", l, opts)
}

func newGuard(fn string, l *padlock.Locker, opts []Option) *Guard {
	g := &Guard{locker: l, config: newConfig(fn, l, opts), routeNS: make(map[string]string), known: make(map[string]bool),
		routeWho: make(map[string]string)}
	if g.namespaceSet && g.namespace != "" {
		g.nsPrefix = lockkey.EscapeRoute(g.namespace) + lockkey.Sep
	}
	return g
}

// acquireGrace is how long past the wait the last attempt of a waiting
// Acquire may take to get its answer.
const acquireGrace = time.Second

// Skip reports whether WithSkip's func lets r through without a lock.
// For a request of KeyFor it reports false, after answering KeyFor that r
// takes no lock, so that no handler runs.
func (g *Guard) Skip(r *http.Request) bool {
	if g.skip == nil || !g.skip(r) {
		return false
	}
	if pr := keyprobe.From(r.Context()); pr != nil {
		pr.Answer("", fmt.Errorf("%w: WithSkip lets the request through without a lock", ErrNoLock))
		return false
	}
	return true
}

// Key returns the lock key for key, the result of a KeyFunc, on the route
// template route: the namespace (WithNamespace, or the route template when
// none is set and route is not empty), escaped with lockkey.EscapeRoute,
// then lockkey.Sep and key, shortened with lockkey.Shorten.
func (g *Guard) Key(route, key string) string {
	prefix := g.nsPrefix
	if !g.namespaceSet && route != "" {
		g.mu.RLock()
		p, ok := g.routeNS[route]
		g.mu.RUnlock()
		if !ok {
			// Routes are few and fixed, so this map stays small.
			p = lockkey.EscapeRoute(route) + lockkey.Sep
			g.mu.Lock()
			g.routeNS[route] = p
			g.known[strings.TrimSuffix(p, lockkey.Sep)] = true
			g.mu.Unlock()
		}
		prefix = p
	}
	return lockkey.Shorten(prefix + key)
}

// Caller returns the padlock.Options.Caller of the locks the Guard takes
// for r on the route template route (r.Pattern in net/http, c.FullPath()
// in Gin), for HoldAs and AcquireAs: "route=<route> caller=#<hash>", the
// route as lockkey.EscapeRoute writes it, cut in its middle to fit
// padlock.MaxOwnerLen, and the identity WithCaller's func returns for ctx
// and r, hashed with WithRedactor's Redactor. A part the Guard does not
// know (no route, no WithCaller, or "" from its func) is left out.
func (g *Guard) Caller(ctx context.Context, r *http.Request, route string) string {
	if g.caller != nil {
		if id := g.caller(ctx, r); id != "" {
			return who.Request(route, id, g.redactor)
		}
	}
	if route == "" {
		return ""
	}
	g.mu.RLock()
	s, ok := g.routeWho[route]
	g.mu.RUnlock()
	if !ok {
		// Routes are few and fixed, so this map stays small.
		s = who.Request(route, "", nil)
		g.mu.Lock()
		g.routeWho[route] = s
		g.mu.Unlock()
	}
	return s
}

// KeyProblem returns the response for an error of a key func: 413 for
// lockkey.ErrBodyTooLarge; 400 for ErrMissingPart, ErrAmbiguousPart,
// ErrInvalidPart and ErrMalformedBody, with the error's text (which names
// the part, never its value) as the detail; 500 for any other error, the
// app's own, whose text is not for the client.
func KeyProblem(err error) *Problem {
	detail := strings.TrimPrefix(err.Error(), "lockkey: ")
	switch {
	case errors.Is(err, lockkey.ErrBodyTooLarge):
		return newProblem(http.StatusRequestEntityTooLarge, detail, err)
	case errors.Is(err, lockkey.ErrMissingPart), errors.Is(err, lockkey.ErrAmbiguousPart),
		errors.Is(err, lockkey.ErrInvalidPart), errors.Is(err, lockkey.ErrMalformedBody):
		return newProblem(http.StatusBadRequest, detail, err)
	}
	// A key func of the app's own failed: not the client's fault, and its
	// message is not for the client.
	return newProblem(http.StatusInternalServerError, "the lock key could not be built", err)
}

// Acquire takes the lock on key, a key from Key, with the lock options of
// WithLockOptions, or returns the problem to refuse the request with: 409
// (or WithBusyStatus's) when the key stays busy, 503 when Redis cannot be
// reached or ctx ends first, 500 otherwise. The lock names no caller: it
// is AcquireAs with "".
//
// A busy answer's RetryAfter is when a retry is likely to succeed: the
// longest of the last 8 holds this Guard's Holds measured in the key's
// namespace, capped at the holder's remaining lease, which is the answer
// when no hold was measured yet; never 0 (one second when nothing is
// known). A Redis that cannot be reached is 503, never a busy answer.
func (g *Guard) Acquire(ctx context.Context, key string) (*padlock.Lock, *Problem) {
	return g.AcquireAs(ctx, key, "")
}

// AcquireAs is Acquire for a lock that names caller as who took it
// (padlock.Options.Caller, unless WithLockOptions set one): the Guard's
// Caller for the request, or one of the adapter's own that Options.Caller
// accepts (an invalid one is a 500).
func (g *Guard) AcquireAs(ctx context.Context, key, caller string) (*padlock.Lock, *Problem) {
	if p := probed(ctx, key); p != nil {
		return nil, p
	}
	actx := ctx
	if g.lock.Wait > 0 {
		// The engine keeps to the wait between attempts, but an attempt
		// sent to a Redis that hangs would wait for the client's read
		// timeout. This deadline stops it (with ContextTimeoutEnabled), so
		// that no answer comes later than the wait and a grace for the
		// last attempt.
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, g.lock.Wait+acquireGrace)
		defer cancel()
	}
	lk, err := g.locker.Acquire(actx, key, g.lockAs(caller))
	if err == nil {
		return lk, nil
	}
	return nil, g.refusal(ctx, actx, key, err, g.lockAcquirer())
}

// lockAs returns the lock options of WithLockOptions, naming caller
// unless they name one.
func (g *Guard) lockAs(caller string) padlock.Options {
	o := g.lock
	if o.Caller == "" {
		o.Caller = caller
	}
	return o
}

// lockAcquirer is how Acquire refuses: the busy status (WithBusyStatus),
// and a Retry-After from the holds measured in the namespace.
func (g *Guard) lockAcquirer() acquirer {
	return acquirer{
		what:       "lock",
		busy:       g.busyStatus,
		busyDetail: "another request holds the lock on this resource; retry later",
		retryAfter: func(ns string, err error) time.Duration {
			left, _ := padlock.RetryAfter(err)
			longest, seen := g.holds.longest(ns)
			return retryAfter(longest, seen, left)
		},
	}
}

// namespaceOf returns the escaped namespace key starts with: WithNamespace's
// or a route template's that Key put there, or "" when it has none. The
// first part of a key without a namespace is request data, never returned.
func (g *Guard) namespaceOf(key string) string {
	if g.namespaceSet {
		return strings.TrimSuffix(g.nsPrefix, lockkey.Sep)
	}
	i := strings.Index(key, lockkey.Sep)
	if i < 0 {
		return ""
	}
	g.mu.RLock()
	ok := g.known[key[:i]]
	g.mu.RUnlock()
	if !ok {
		return ""
	}
	return key[:i]
}

// Release lets lk go on a context detached from the request r, so that a
// request cancelled by its client still releases, bounded by
// WithReleaseTimeout. A failure goes to WithReleaseError's func, and is
// returned.
func (g *Guard) Release(r *http.Request, lk *padlock.Lock) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), g.releaseTimeout)
	defer cancel()
	err := lk.Release(ctx)
	if err != nil && g.releaseError != nil {
		g.releaseError(r, err)
	}
	return err
}

// ReadBody reads r's body before the lock is taken, as WithReadBody asks,
// and returns the problem to refuse r with when the body is over the limit
// (413) or cannot be read (400). Without WithReadBody it does nothing.
func (g *Guard) ReadBody(r *http.Request) *Problem {
	if g.readBody <= 0 {
		return nil
	}
	if _, err := lockkey.ReadBody(r, g.readBody); err != nil {
		return KeyProblem(err)
	}
	return nil
}

// MaxHold returns WithMaxHold's bound, 0 for none: a face wraps the
// response writer (see Hold.Begin) only when there is one.
func (g *Guard) MaxHold() time.Duration { return g.maxHold }

// Refuse writes p for r with WithResponder's func, its Instance set to the
// request path. A request of KeyFor gets no answer: KeyFor is told of p
// instead. When p is Acquire's (or Limiter.Acquire's) refusal, an
// idempotency middleware in front is told that the handler did not run,
// so that the answer frees the Idempotency-Key instead of being stored.
func (g *Guard) Refuse(w http.ResponseWriter, r *http.Request, p *Problem) {
	if pr := keyprobe.From(r.Context()); pr != nil {
		pr.Answer("", refusedProbe(p))
		return
	}
	if p.beforeHandler {
		if rw := refusal.From(r.Context()); rw != nil {
			rw.Mark()
		}
	}
	p.Instance = r.URL.Path
	g.respond(w, r, p)
}
