package httplock

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
)

// DefaultReleaseTimeout bounds the Release after the handler, unless
// WithReleaseTimeout says otherwise.
const DefaultReleaseTimeout = 5 * time.Second

// An Option configures Lock, NewGuard, and the Gin middleware.Lock built on
// them. Options are checked once, when the middleware is built; an invalid
// one panics there with a message naming it.
//
// Every Option applies to both faces, net/http and Gin. Options of other
// middlewares have types of their own (idempotency.Option,
// decorator.Option), so passing one here does not compile.
type Option func(*config)

type config struct {
	lock           padlock.Options
	busyStatus     int
	respond        Responder
	namespace      string
	namespaceSet   bool
	skip           func(*http.Request) bool
	releaseTimeout time.Duration
	releaseError   func(r *http.Request, err error) // nil: none
	echoKey        bool
	maxHold        time.Duration                                     // 0: none
	readBody       int64                                             // 0: the body is not read before the lock
	caller         func(ctx context.Context, r *http.Request) string // nil: none
	redactor       *lockkey.Redactor                                 // nil: the process's
	errs           []string                                          // problems options found in their own arguments
}

func (c *config) invalid(msg string) { c.errs = append(c.errs, msg) }

// WithLockOptions sets how the lock is taken and held: lease (TTL), how long
// a request waits for a busy key (Wait), retry pacing, renewal. Invalid
// Options (see padlock.Options.Validate) panic at construction.
// Default: the zero Options, that is the Locker's defaults: a 30s lease
// renewed while the handler runs, and no waiting, so a busy key is refused
// at once.
//
// With Wait set, a Redis that cannot be reached is still a 503 within a
// second or two failed attempts, never after the whole wait, and a Redlock
// that loses its quorum is 503, never 409. A Redis that hangs (accepts but
// does not answer) is cut off by a deadline one second past Wait, and the
// engine may spend up to a second more tidying the unanswered attempt; that
// deadline reaches the socket only when the go-redis client has
// ContextTimeoutEnabled (otherwise the attempt and its tidying each wait
// for the client's ReadTimeout; NewRedlock refuses such node clients, New
// does not). So no refusal takes longer than Wait and about 2s, and no
// request holds on longer than that, its handler and WithReleaseTimeout.
func WithLockOptions(o padlock.Options) Option {
	return func(c *config) { c.lock = o }
}

// WithBusyStatus sets the status of the response when the key is held by
// someone else: http.StatusConflict (409) or http.StatusLocked (423); any
// other value panics at construction. Default: 409.
func WithBusyStatus(status int) Option {
	return func(c *config) { c.busyStatus = status }
}

// WithResponder sets the function that writes refusals (busy, bad key,
// Redis down). It must write a response; the Gin middleware aborts the
// chain after it. A nil fn panics at construction. Default: WriteProblem.
func WithResponder(fn Responder) Option {
	return func(c *config) { c.respond = fn }
}

// WithNamespace sets the namespace that goes in front of every key the
// middleware locks. Requests share a lock when namespace and key are equal,
// so give two routes the same namespace to make them exclude each other, or
// "" for no namespace at all. Default: the route template, c.FullPath() in
// Gin and r.Pattern in net/http (empty when the router does not set it, as
// with gorilla/mux or a chi middleware mounted with Use: set a namespace
// there). KeyFor shows the key a request gets.
func WithNamespace(ns string) Option {
	return func(c *config) { c.namespace, c.namespaceSet = ns, true }
}

// WithSkip makes the middleware run the handler without a lock when fn
// returns true for the request. A nil fn panics at construction. Default:
// never skip.
func WithSkip(fn func(r *http.Request) bool) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithSkip: nil func")
		}
		c.skip = fn
	}
}

// WithReleaseTimeout bounds the Release after the handler. Release runs on a
// context detached from the request (so a cancelled request still releases)
// with this timeout; if Redis does not answer in time, the lock expires
// with its lease. It must be positive. Default: DefaultReleaseTimeout (5s).
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) { c.releaseTimeout = d }
}

// WithReleaseError sets a function that is told when the Release after the
// handler fails: padlock.ErrNotHeld when the lock was no longer held in
// Redis (it expired or was taken away during the request), or a
// padlock.ErrUnavailable error when Redis did not answer (the lock then
// expires with its lease). r is the request as it reached the middleware.
// Use it to log or count such requests; the response has usually been
// written by then. A lock the watchdog already judged lost (the handler's
// context was cancelled) that is still held in Redis releases cleanly and
// is not reported. fn runs after the handler (also when it panicked) on
// each request's goroutine, so concurrently for concurrent requests: it
// must be safe for concurrent use, and should not panic. Lock also adds the
// error to the Gin context (c.Error) either way. A nil fn panics at
// construction. Default: none (Lock here drops the error).
func WithReleaseError(fn func(r *http.Request, err error)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithReleaseError: nil func")
		}
		c.releaseError = fn
	}
}

// WithEchoKey makes busy answers (Lock's 409 or 423, Limit's 429 or 503
// when every permit is taken) carry the full lock key (Problem.Key, the
// "key" member of the body) and leaves it in the errors every refusal of
// a lock or permit carries for logs (Problem.Err: busy, full, 503 and
// 500 alike). Without it they carry only the key's namespace
// (Problem.Namespace), and the key in Problem.Err's text is replaced by
// the namespace and "…": a key is built from request data, and one built
// from a secret (an API key, a session header) must not be reflected to
// whoever sends the request, nor written to logs. Every face (Lock,
// Limit, Guard, Limiter, the Gin middleware.Lock and middleware.Limit)
// builds these answers in one place, so they all keep to it. Turn it on
// only when keys hold nothing secret. Default: off.
func WithEchoKey() Option {
	return func(c *config) { c.echoKey = true }
}

// WithMaxHold bounds how long one request may hold the lock, so that a
// client cannot decide it: a body sent a byte at a time, or a large
// response the client never reads, would otherwise keep the handler, and
// the renewed lock, for as long as the client likes.
//
// At the bound the handler's context is cancelled (context.Cause is
// ErrHoldExceeded) and the lock is no longer renewed, but it is not
// released while the handler runs: mutual exclusion holds past the bound
// too. A handler that heeds its context returns, and the lock is released
// then as usual. One that does not keeps the key locked until the lock's
// lease runs out, at most one lease (Options.TTL, 30s by default) after
// the bound, even if it never returns; a request for the key meanwhile is
// refused as busy (409, or WithBusyStatus's) with a Retry-After up to the
// lease's end. Whoever takes the key after that has a greater fence
// (padlock.Lock.Fence), so a store that checks fences rejects what the
// late handler still writes; and when it returns, its release finds the
// lock gone (padlock.ErrNotHeld, told to WithReleaseError's func). So a
// client holds a key for at most d plus one lease, and a short TTL
// shortens that.
//
// What the handler writes after the bound is dropped (its writes return
// ErrHoldExceeded). If it had written nothing before the bound, the client
// gets 503 Service Unavailable once the handler returns (a problem, with no
// Retry-After); if it had, the response goes on as written so far and the
// rest is cut off. Choose d above the longest honest request, and set the
// server's ReadTimeout and WriteTimeout too, which end the connection.
// With a bound, the handler's http.ResponseWriter wraps the server's: reach
// its Flusher or Hijacker through http.ResponseController, which unwraps
// it. d must not be negative. Default: 0, no bound.
func WithMaxHold(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.invalid(fmt.Sprintf("WithMaxHold: %v, want >= 0", d))
		}
		c.maxHold = d
	}
}

// WithReadBody makes the middleware read the whole request body, at most
// limit bytes, before it takes the lock, so that a client sending its body
// slowly holds no lock while it does. A larger body is refused with 413
// Content Too Large, one that cannot be read with 400, both without taking
// the lock. The body is kept in memory and given back to the handler (and
// to the key's JSON or Form parts, which do not read it again) as r.Body.
// Use it on routes whose handler reads the body; set the server's
// ReadTimeout, which bounds how long the reading may take. limit must be
// positive. Default: off, the handler reads the body while holding the
// lock.
func WithReadBody(limit int64) Option {
	return func(c *config) {
		if limit <= 0 {
			c.invalid(fmt.Sprintf("WithReadBody: %d, want > 0", limit))
		}
		c.readBody = limit
	}
}

// WithCaller names who sends each request in its lock's owner, so that
// the lock page, Locker.Inspect and a refused request's
// padlock.NotAcquiredError.Holder tell which caller holds the lock: fn
// returns the caller's identity (the authenticated user or API client, as
// the authentication step in front established it), "" when it does not
// know, and the lock carries it as a keyed hash, "caller=#3fa9c1e2d4b5"
// (see WithRedactor), never as it is: an identity may be an e-mail
// address or a key. Take it from authentication, not from a header the
// client sends unchecked. ctx is r.Context() in the net/http faces, and
// the *gin.Context in the Gin faces (see middleware.WithCaller). fn runs
// before the lock is taken, on each request's goroutine: it must be safe
// for concurrent use, and cheap. A nil fn panics at construction.
// Default: none, and the lock names the request's route only
// ("route=POST /orders/<id>/pay", see Guard.Caller).
func WithCaller(fn func(ctx context.Context, r *http.Request) string) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithCaller: nil func")
		}
		c.caller = fn
	}
}

// WithRedactor hashes the callers WithCaller names with r: share one with
// the lock page (lockview.Config.Redactor) and the logs, with a secret the
// fleet shares (lockkey.WithRedactSecret), so that a caller has one hash
// in every process, and the app can log r.Hash(caller) to match it. A nil
// r is the process's Redactor. Default: the process's Redactor, with a
// random secret (see lockkey.Redactor).
func WithRedactor(r *lockkey.Redactor) Option {
	return func(c *config) { c.redactor = r }
}

// newConfig applies opts and validates the result, panicking with a message
// that names the middleware and the option at fault.
func newConfig(fn string, l *padlock.Locker, opts []Option) config {
	fail := func(format string, args ...any) {
		panic(fmt.Sprintf("httplock: %s: %s", fn, fmt.Sprintf(format, args...)))
	}
	if l == nil {
		fail("nil *padlock.Locker")
	}
	c := config{busyStatus: http.StatusConflict, respond: WriteProblem, releaseTimeout: DefaultReleaseTimeout}
	for i, o := range opts {
		if o == nil {
			fail("option %d is nil", i+1)
		}
		o(&c)
	}
	if len(c.errs) > 0 {
		fail("%s", c.errs[0])
	}
	if err := c.lock.Validate(); err != nil {
		fail("WithLockOptions: %v", err)
	}
	if c.busyStatus != http.StatusConflict && c.busyStatus != http.StatusLocked {
		fail("WithBusyStatus: %d, want 409 (http.StatusConflict) or 423 (http.StatusLocked)", c.busyStatus)
	}
	if c.respond == nil {
		fail("WithResponder: nil Responder")
	}
	if c.releaseTimeout <= 0 {
		fail("WithReleaseTimeout: %v, want > 0", c.releaseTimeout)
	}
	return c
}
