package middleware

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/keyfunc"
)

// guard is the part Lock and LockHTTP share: key, acquire, refuse, release.
type guard struct {
	locker *padlock.Locker
	config
	nsPrefix string // escaped namespace and Sep, when namespaceSet

	mu      sync.RWMutex
	routeNS map[string]string // route template -> escaped namespace and Sep
}

func newGuard(fn string, l *padlock.Locker, opts []Option) *guard {
	g := &guard{locker: l, config: newConfig(fn, l, opts), routeNS: make(map[string]string)}
	if g.namespaceSet && g.namespace != "" {
		g.nsPrefix = keyfunc.EscapeRoute(g.namespace) + keyfunc.Sep
	}
	return g
}

// lockKey puts the namespace, the route's unless set otherwise, in front of
// the key from the key func.
func (g *guard) lockKey(route, key string) string {
	prefix := g.nsPrefix
	if !g.namespaceSet && route != "" {
		g.mu.RLock()
		p, ok := g.routeNS[route]
		g.mu.RUnlock()
		if !ok {
			// Routes are few and fixed, so this map stays small.
			p = keyfunc.EscapeRoute(route) + keyfunc.Sep
			g.mu.Lock()
			g.routeNS[route] = p
			g.mu.Unlock()
		}
		prefix = p
	}
	return keyfunc.Shorten(prefix + key)
}

// keyProblem turns a key func error into the response for it.
func keyProblem(err error) *Problem {
	detail := strings.TrimPrefix(err.Error(), "keyfunc: ")
	switch {
	case errors.Is(err, keyfunc.ErrBodyTooLarge):
		return newProblem(http.StatusRequestEntityTooLarge, detail, err)
	case errors.Is(err, keyfunc.ErrMissingPart), errors.Is(err, keyfunc.ErrAmbiguousPart),
		errors.Is(err, keyfunc.ErrMalformedBody):
		return newProblem(http.StatusBadRequest, detail, err)
	}
	// A key func of the app's own failed: not the client's fault, and its
	// message is not for the client.
	return newProblem(http.StatusInternalServerError, "the lock key could not be built", err)
}

// acquire takes the lock on key, or says how to refuse the request.
func (g *guard) acquire(ctx context.Context, key string) (*padlock.Lock, *Problem) {
	lk, err := g.locker.Acquire(ctx, key, g.lock)
	if err == nil {
		return lk, nil
	}
	switch {
	case ctx.Err() != nil:
		return nil, newProblem(http.StatusServiceUnavailable, "the request ended before the lock was acquired", err)
	// Unavailable first: under Redlock, too few nodes answering is both
	// not acquired and unavailable, and it is the service that failed.
	case errors.Is(err, padlock.ErrUnavailable), errors.Is(err, padlock.ErrClosed):
		return nil, newProblem(http.StatusServiceUnavailable, "the lock service is unavailable", err)
	case errors.Is(err, padlock.ErrNotAcquired):
		p := newProblem(g.busyStatus, "another request holds the lock on this resource; retry later", err)
		p.Key = key
		p.RetryAfter, _ = padlock.RetryAfter(err)
		return nil, p
	}
	return nil, newProblem(http.StatusInternalServerError, "the lock could not be taken", err)
}

// release lets lk go on a context detached from the request r, so that a
// request cancelled by its client still releases, bounded by the release
// timeout. A failure goes to WithReleaseError's func, and is returned.
func (g *guard) release(r *http.Request, lk *padlock.Lock) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), g.releaseTimeout)
	defer cancel()
	err := lk.Release(ctx)
	if err != nil && g.releaseError != nil {
		g.releaseError(r, err)
	}
	return err
}

// refuse writes p for r.
func (g *guard) refuse(w http.ResponseWriter, r *http.Request, p *Problem) {
	p.Instance = r.URL.Path
	g.respond(w, r, p)
}
