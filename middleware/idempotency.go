package middleware

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
)

// Idempotency returns a Gin middleware that makes a route idempotent under
// the Idempotency-Key request header (IETF draft "The Idempotency-Key HTTP
// Header Field"): the first request with a key runs the handler, and a retry
// with the same key gets the first request's response back, status, headers
// and body, marked "Idempotent-Replayed: true", without running the handler
// again. l holds the in-flight lock; rdb stores the responses. Neither is
// owned by the middleware.
//
//	r.POST("/orders", middleware.Idempotency(locker, rdb, middleware.WithCaller(clientID)), createOrder)
//
// What a request gets (refusals are problem+json, see
// httplock.WriteProblem):
//
//   - No Idempotency-Key: 400, unless OptionalKey (then the handler runs with
//     no idempotency). A malformed key (see ParseIdempotencyKey) or two
//     Idempotency-Key fields: 400.
//   - Body larger than WithMaxBodyBytes: 413.
//   - The key's first request is still running: 409 with "Retry-After: 1",
//     or, with WaitForInFlight, a wait for it to finish and then its replay.
//   - The key was used with a different request (see WithFingerprint): 422.
//   - The key's first request finished: its stored response, replayed,
//     errors included (see WithStoreStatus for what is stored). If its
//     response was not kept (larger than WithMaxResponseBytes, or streamed):
//     409 without Retry-After, saying so; the handler does not run again.
//   - Redis unreachable: 503; the handler never runs without the in-flight
//     lock or without knowing whether the key was used.
//
// A key is scoped by route template (c.FullPath()), caller (WithCaller) and
// key: the same key on another route, or from another caller, is another
// key. In Redis, with scope = lockkey.Shorten(EscapeRoute(route) + ":" +
// Escape(caller) + ":" + Escape(key)), the record of a finished request is
// at WithRecordPrefix + scope (default "padlock:idempotency:" + scope), one
// string kept for WithRetention (24h), and the in-flight lock is l's lock on
// "idempotency:" + scope.
//
// How a request runs:
//
//  1. Replay path, one Redis round trip: a GET of the record. Found: 422,
//     409 or the replay, and the chain stops.
//  2. Not found: take the in-flight lock (a padlock lock, renewed while the
//     handler runs, so it frees itself within WithInFlightTTL if the
//     process dies: a crash never leaves a key stuck), then GET again, for a
//     request that finished between step 1 and the lock.
//  3. Run the rest of the chain with a response writer that holds the
//     response back (up to WithMaxResponseBytes). The handler sees the lock
//     through c.Request.Context() (cancelled if it is lost) and LockFrom,
//     and the key through IdempotencyKeyFrom; it can still bind the body.
//  4. Store the record (SET NX PX, on a context detached from the request
//     and bounded by WithStoreTimeout), then send the response, then release
//     the lock. Storing first means a client that got the response gets the
//     same one on a retry, never 409. A record is never overwritten.
//
// A panicking handler stores nothing: the lock is released, the panic goes
// on to gin's recovery, and a retry runs the handler again. Put the recovery
// in front of this middleware (r.Use(gin.Recovery()) first), so the client
// gets the recovery's clean 500. Behind it works too: the recovery's 500 is
// not stored, nor is a response whose status someone tried to change after
// the body started, which is how a panic after a partial write shows. A 5xx
// is not stored either (see DefaultStoreStatus), nor anything for a handler
// that hijacks the connection. A response the handler flushed early, or one
// larger than WithMaxResponseBytes, is sent as it streams, with
// "Idempotent-Replayable: false", and a marker is stored in its place.
//
// The Retry-After of the in-flight 409 is 1 second, not the lock's
// remaining lease: the lease says when a crashed holder's key frees, while
// a live holder usually finishes far sooner.
//
// Idempotency panics if l or rdb is nil or an option is invalid.
func Idempotency(l *padlock.Locker, rdb redis.UniversalClient, opts ...IdempotencyOption) gin.HandlerFunc {
	if l == nil {
		panic("middleware: Idempotency: nil *padlock.Locker")
	}
	if rdb == nil {
		panic("middleware: Idempotency: nil redis client")
	}
	cfg := newIdemConfig(opts)
	g := newGuard("Idempotency", l,
		httplock.WithLockOptions(padlock.Options{TTL: cfg.lockTTL, Wait: cfg.wait}),
		httplock.WithReleaseTimeout(cfg.storeTimeout))
	m := &idempotency{g: g, cfg: cfg, store: recordStore{rdb: rdb, retention: cfg.retention}}
	if cfg.caller != nil {
		m.caller = keyfunc.Custom("caller", lockkey.Text(), cfg.caller)
	}
	return m.serve
}

type idempotency struct {
	g      *httplock.Guard
	cfg    idemConfig
	caller keyfunc.Func // nil: no caller
	store  recordStore
}

// idempotencyKey is the gin context key of the request's Idempotency-Key.
type idempotencyKey struct{}

// IdempotencyKeyFrom returns the Idempotency-Key of a request the
// Idempotency middleware let through to the handler, unquoted, or "" when
// there is none (no key on an OptionalKey route, or no Idempotency on the
// route). Handlers can store it with what they create, for a unique
// constraint as a last line of defence.
func IdempotencyKeyFrom(c *gin.Context) string {
	if c == nil {
		return ""
	}
	k, _ := c.Get(idempotencyKey{})
	s, _ := k.(string)
	return s
}

func (m *idempotency) serve(c *gin.Context) {
	vals := c.Request.Header[IdempotencyKeyHeader]
	switch {
	case len(vals) == 0 && m.cfg.optional:
		return // gin runs the rest of the chain
	case len(vals) == 0:
		abort(m.g, c, newProblem(http.StatusBadRequest, "this operation requires an Idempotency-Key header", nil))
		return
	case len(vals) > 1:
		abort(m.g, c, newProblem(http.StatusBadRequest, "more than one Idempotency-Key field", nil))
		return
	}
	key, err := ParseIdempotencyKey(vals[0])
	if err != nil {
		abort(m.g, c, newProblem(http.StatusBadRequest, strings.TrimPrefix(err.Error(), "middleware: "), err))
		return
	}
	caller := ""
	if m.caller != nil {
		if caller, err = m.caller(c); err != nil {
			abort(m.g, c, requestProblem(err, "the caller could not be identified"))
			return
		}
	}
	body, err := keyfunc.ReadBody(c, m.cfg.maxBody)
	if err != nil {
		abort(m.g, c, requestProblem(err, "the request body could not be read"))
		return
	}
	fp, err := m.cfg.fingerprint(c, body)
	if err != nil {
		abort(m.g, c, requestProblem(err, "the request could not be fingerprinted"))
		return
	}
	scope := m.g.Key(c.FullPath(), caller+lockkey.Sep+lockkey.Escape(key))
	recKey := m.cfg.prefix + scope
	req := c.Request
	ctx := req.Context()

	// The replay path: one GET.
	if m.answered(c, ctx, recKey, fp) {
		return
	}
	lk, p := m.g.Acquire(ctx, "idempotency"+lockkey.Sep+scope)
	if p != nil {
		if errors.Is(p.Err, padlock.ErrNotAcquired) && ctx.Err() == nil {
			p.Detail = "a request with this Idempotency-Key is still being processed; retry later"
			// The holder's lease says when a crashed holder's key frees,
			// not when a live one finishes, which is usually far sooner.
			p.Key, p.RetryAfter = "", 0
		}
		abort(m.g, c, p)
		return
	}
	defer func() {
		if err := m.g.Release(req, lk); err != nil {
			_ = c.Error(err)
		}
	}()
	// A request with the key may have finished between the GET and the lock.
	if m.answered(c, ctx, recKey, fp) {
		return
	}
	m.run(c, lk, key, fp, recKey)
}

// answered looks the record up and, when there is one, answers from it. It
// reports whether the request was answered (with the replay, 409, 422, or
// an error).
func (m *idempotency) answered(c *gin.Context, ctx context.Context, recKey, fp string) bool {
	rec, ok, err := m.store.get(ctx, recKey)
	switch {
	case errors.Is(err, errBadRecord):
		abort(m.g, c, newProblem(http.StatusInternalServerError, "the stored response for this Idempotency-Key cannot be read", err))
		return true
	case err != nil:
		abort(m.g, c, newProblem(http.StatusServiceUnavailable, "the idempotency store is unavailable", err))
		return true
	case !ok:
		return false
	case rec.fingerprint != fp:
		abort(m.g, c, newProblem(http.StatusUnprocessableEntity, "this Idempotency-Key was already used for a different request", nil))
	case rec.kind == recordNotReplayable:
		p := newProblem(http.StatusConflict, "a request with this Idempotency-Key was already processed, "+
			"but its response was not kept and cannot be replayed", nil)
		p.RetryAfter = -1 // retrying will not help
		abort(m.g, c, p)
	default:
		h := c.Writer.Header()
		rec.writeHeader(h)
		h.Set(IdempotentReplayedHeader, "true")
		c.Writer.WriteHeader(rec.status)
		c.Writer.WriteHeaderNow()
		_, _ = io.WriteString(c.Writer, rec.body)
		c.Abort()
	}
	return true
}

// run runs the rest of the chain holding lk, then stores and sends its
// response.
func (m *idempotency) run(c *gin.Context, lk *padlock.Lock, key, fp, recKey string) {
	req, w := c.Request, c.Writer
	before := w.Header().Clone()
	rec := newRecorder(w, m.cfg.maxResponse)
	locked := req.WithContext(lk.Context(req.Context()))
	c.Request, c.Writer = locked, rec
	c.Set(idempotencyKey{}, key)
	// Deferred, so it also runs when the chain panics: then nothing is
	// stored, the lock is released, and the panic goes on to gin's recovery.
	defer func() {
		rec.end()
		if c.Writer == rec {
			c.Writer = w
		}
		if c.Request == locked {
			c.Request = req
		}
	}()
	c.Next()

	out := rec.end()
	storable := !out.hijacked && !out.late && m.cfg.storeStatus(out.status)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), m.cfg.storeTimeout)
	defer cancel()
	switch {
	case out.hijacked:
	case out.committed:
		// Sent already, and not kept: the marker stops a retry from
		// running the handler again.
		if storable {
			m.put(c, ctx, recKey, &record{kind: recordNotReplayable, fingerprint: fp, status: out.status}, nil)
		}
	case !storable:
		w.Header().Set(IdempotentReplayableHeader, "false")
		send(w, out.status, out.body)
	default:
		r := &record{kind: recordResponse, fingerprint: fp, status: out.status, header: handlerHeader(w.Header(), before)}
		if !m.put(c, ctx, recKey, r, out.body) {
			w.Header().Set(IdempotentReplayableHeader, "false")
		}
		send(w, out.status, out.body)
	}
}

// put stores r with body at recKey and reports whether it did.
func (m *idempotency) put(c *gin.Context, ctx context.Context, recKey string, r *record, body []byte) bool {
	stored, err := m.store.put(ctx, recKey, r, body)
	switch {
	case err != nil:
		_ = c.Error(err)
	case !stored:
		// Only when the in-flight lock was lost while the handler ran and
		// another request with the key finished first: its record stays.
		_ = c.Error(errors.New("middleware: Idempotency: a record for this key was stored by another request; the in-flight lock was lost"))
	}
	return stored
}

// requestProblem is the response for an error from a func of the app's that
// reads the request: lockkey errors are the client's (400, 413); others are
// the app's own, and their message is not for the client.
func requestProblem(err error, detail string) *httplock.Problem {
	p := httplock.KeyProblem(err)
	if p.Status == http.StatusInternalServerError {
		p.Detail = detail
	}
	return p
}
