package httplock

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/keyattr"
	"github.com/padlockgo/padlock/lockkey"
)

// acquirer is what differs between the faces that take a key: a lock
// (Guard.Acquire: Lock, the Gin middleware.Lock, the idempotency
// middleware's in-flight lock) and a permit (Limiter.Acquire: Limit and
// the Gin middleware.Limit). Everything else about a refusal is
// refusal's, so that the faces cannot answer differently.
type acquirer struct {
	what       string // "lock" or "permit", in the details
	busy       int    // the status when the key stays busy (or full)
	busyDetail string
	// retryAfter is the Retry-After of a busy answer in namespace ns,
	// from err, the Acquire's error.
	retryAfter func(ns string, err error) time.Duration
}

// refusal is the one builder of the answer to a request that did not get
// its lock or permit, for every face: 503 when ctx (the request's) ended
// first, when Redis cannot be reached, the Locker is closed, or actx (the
// attempt's own deadline) ended; the face's busy status with the key's
// namespace and a Retry-After when the key stayed busy; 500 otherwise.
//
// Without WithEchoKey no part of it carries key, which is built from
// request data that may be secret: the body has the namespace only, and
// the error kept for logs (Problem.Err) shows the namespace and "…" where
// the key was. With WithEchoKey a busy answer carries the key
// (Problem.Key) and the error is left as it is.
//
// Every such problem is marked as a refusal before the handler ran
// (Problem.beforeHandler), which Refuse reports to an idempotency
// middleware in front: the Idempotency-Key is freed for a retry.
func (g *Guard) refusal(ctx, actx context.Context, key string, err error, a acquirer) *Problem {
	var p *Problem
	ns := g.namespaceOf(key)
	switch {
	case ctx.Err() != nil:
		p = newProblem(http.StatusServiceUnavailable, "the request ended before the "+a.what+" was acquired", err)
	// Unavailable first: under Redlock, too few nodes answering is both
	// not acquired and unavailable, and it is the service that failed.
	case errors.Is(err, padlock.ErrUnavailable), errors.Is(err, padlock.ErrClosed),
		actx.Err() != nil: // the last attempt got no answer in its grace
		p = newProblem(http.StatusServiceUnavailable, "the lock service is unavailable", err)
	case errors.Is(err, padlock.ErrNotAcquired):
		p = newProblem(a.busy, a.busyDetail, err)
		p.Namespace = ns
		p.RetryAfter = a.retryAfter(ns, err)
		if g.echoKey {
			p.Key = key
		}
	default:
		p = newProblem(http.StatusInternalServerError, "the "+a.what+" could not be taken", err)
	}
	if !g.echoKey && p.Err != nil {
		p.Err = &redactedError{err: p.Err, key: key, ns: ns}
	}
	p.beforeHandler = true
	return p
}

// redactedError is an Acquire error whose text does not show the lock key,
// which may hold request data that is secret; errors.Is and errors.As still
// see the error itself.
type redactedError struct {
	err     error
	key, ns string
}

func (e *redactedError) Error() string {
	return keyattr.Scrub(e.err.Error(), e.key, e.ns+lockkey.Sep+"…")
}

func (e *redactedError) Unwrap() error { return e.err }
