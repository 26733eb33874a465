package idempotency

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/internal/keyprobe"
	"github.com/padlockgo/padlock/internal/refusal"
	"github.com/padlockgo/padlock/internal/who"
	"github.com/padlockgo/padlock/lockkey"
)

// Core is the middleware without a router: what New does for net/http and
// ginidem.New for Gin, for a face on another router. A Core is safe for
// concurrent use.
type Core struct {
	g     *httplock.Guard
	cfg   config
	store recordStore
}

// A Chain is one request's place in a router's middleware chain, as a face
// of Core sees it: New's is net/http's, ginidem's is Gin's.
type Chain interface {
	// Route returns the route template the request matched, which scopes
	// its key unless WithNamespace says otherwise; "" for none, and then
	// the method and path scope it.
	Route() string
	// Caller returns the identity of the authenticated caller, as the
	// authentication step in front established it, or "" when there is
	// none: the request is then refused with 401. An error refuses it too:
	// lockkey's errors with 400 or 413, any other with 500.
	Caller() (string, error)
	// Body returns the request body, at most limit bytes, leaving it
	// readable for the handler (lockkey.ReadBody). Errors are lockkey's.
	Body(limit int64) ([]byte, error)
	// Next runs the rest of the chain with w and r.
	Next(w http.ResponseWriter, r *http.Request)
	// Error is told an error the client does not see (see WithError).
	Error(err error)
}

// NewCore returns a Core taking its in-flight locks from l and storing
// responses with rdb, neither owned by it, configured by opts. It panics if
// l or rdb is nil or an option is invalid.
func NewCore(l *padlock.Locker, rdb redis.UniversalClient, opts ...Option) *Core {
	return newCore("NewCore", l, rdb, opts)
}

func newCore(fn string, l *padlock.Locker, rdb redis.UniversalClient, opts []Option) *Core {
	if l == nil {
		panic("idempotency: " + fn + ": nil *padlock.Locker")
	}
	if rdb == nil {
		panic("idempotency: " + fn + ": nil redis client")
	}
	cfg := newConfig(fn, opts)
	// A guard of its own, built from this Core's settings: none is shared
	// with another middleware or changed after it is built.
	gopts := []httplock.Option{
		httplock.WithLockOptions(padlock.Options{TTL: cfg.lockTTL, Wait: cfg.wait}),
		httplock.WithReleaseTimeout(cfg.storeTimeout),
		httplock.WithResponder(cfg.respond),
	}
	if cfg.namespaceSet {
		gopts = append(gopts, httplock.WithNamespace(cfg.namespace))
	}
	return &Core{
		g:     httplock.NewGuard(l, gopts...),
		cfg:   cfg,
		store: recordStore{rdb: rdb, retention: cfg.retention},
	}
}

// keyCtxKey is the context key of the request's Idempotency-Key.
type keyCtxKey struct{}

// KeyFrom returns the Idempotency-Key of a request the middleware let
// through to the handler, from its context, unquoted, or "" when there is
// none (no key on a WithOptionalKey route, or no middleware on the route).
// Handlers can store it with what they create, for a unique constraint as
// a last line of defence.
func KeyFrom(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	s, _ := ctx.Value(keyCtxKey{}).(string)
	return s
}

// Serve answers r through ch: it refuses it, replays a stored response, or
// runs ch.Next holding the key's in-flight lock and stores what it wrote.
// It reports whether ch.Next ran; when it did not, Serve wrote the
// response.
func (m *Core) Serve(w http.ResponseWriter, r *http.Request, ch Chain) (ran bool) {
	if keyprobe.From(r.Context()) != nil {
		// httplock.KeyFor asks for the lock the request takes further on:
		// not the Idempotency-Key's in-flight lock, and nothing is stored.
		ch.Next(w, r)
		return true
	}
	vals := r.Header[KeyHeader]
	switch {
	case len(vals) == 0 && m.cfg.optional:
		ch.Next(w, r)
		return true
	case len(vals) == 0:
		m.refuse(w, r, ch, newProblem(http.StatusBadRequest, "this operation requires an Idempotency-Key header", nil))
		return false
	case len(vals) > 1:
		m.refuse(w, r, ch, newProblem(http.StatusBadRequest, "more than one Idempotency-Key field", nil))
		return false
	}
	key, err := ParseKey(vals[0])
	if err != nil {
		m.refuse(w, r, ch, newProblem(http.StatusBadRequest, strings.TrimPrefix(err.Error(), "idempotency: "), err))
		return false
	}
	id, err := ch.Caller()
	if err != nil {
		m.refuse(w, r, ch, requestProblem(err, "the caller could not be identified"))
		return false
	}
	if id == "" {
		// Never a scope shared by everyone who is not signed in: anyone
		// could replay, or squat, another anonymous caller's key.
		m.refuse(w, r, ch, newProblem(http.StatusUnauthorized, "this operation requires an authenticated caller", nil))
		return false
	}
	body, err := ch.Body(m.cfg.maxBody)
	if err != nil {
		m.refuse(w, r, ch, requestProblem(err, "the request body could not be read"))
		return false
	}
	fp, err := m.cfg.fingerprint(r, body)
	if err != nil {
		m.refuse(w, r, ch, requestProblem(err, "the request could not be fingerprinted"))
		return false
	}
	caller := callerPart(id)
	route := ch.Route()
	scope := m.scope(r, route, caller+lockkey.Sep+lockkey.Escape(key))
	recKey := m.cfg.prefix + scope
	ctx := r.Context()

	// The replay path: one GET.
	rec, ok, err := m.store.get(ctx, recKey)
	if m.answered(w, r, ch, rec, ok, err, fp) {
		return false
	}
	// The lock names the route and the caller (hashed), not the path,
	// which is request data.
	lk, p := m.g.AcquireAs(ctx, "idempotency"+lockkey.Sep+scope, who.Request(route, id, m.cfg.redactor))
	if p != nil {
		if errors.Is(p.Err, padlock.ErrNotAcquired) && ctx.Err() == nil {
			p.Detail = "a request with this Idempotency-Key is still being processed; retry later"
			// The holder's lease says when a crashed holder's key frees,
			// not when a live one finishes, which is usually far sooner.
			p.Key, p.RetryAfter = "", 0
		}
		m.refuse(w, r, ch, p)
		return false
	}
	st := &inFlight{lk: lk}
	defer m.finish(r, ch, st)
	// A request with the key may have finished between the GET and the
	// lock. A place in the caller's quota is reserved in the same round
	// trip.
	if m.cfg.quota.on() {
		st.slot = newSlot(m.cfg.prefix, caller)
	}
	rec, ok, over, reserved, err := m.store.getReserved(ctx, recKey, m.cfg.quota, st.slot)
	st.reserved = reserved
	if m.answered(w, r, ch, rec, ok, err, fp) {
		return false
	}
	if over > 0 {
		// Refused before the handler runs: a response it could not store
		// would leave a retry free to run it again.
		p := newProblem(http.StatusTooManyRequests, "this caller has too many stored responses; retry later", nil)
		p.RetryAfter = over
		m.refuse(w, r, ch, p)
		return false
	}
	m.run(w, r, ch, st, key, fp, recKey)
	return true
}

// inFlight is what a request holds once it took its key's in-flight lock.
type inFlight struct {
	lk       *padlock.Lock
	slot     slot // in the caller's quota; zero when the quota is off
	reserved bool // slot is reserved
	stored   bool // a record took the slot over
	// keep says to leave the key locked for one more lease instead of
	// releasing it: the answer does not say the handler finished (see
	// unfinished).
	keep bool
}

// finish frees what st holds, on a context detached from the request:
// the reserved slot, unless a record took it over, and the in-flight lock,
// released or, when st.keep, left to run out.
func (m *Core) finish(r *http.Request, ch Chain, st *inFlight) {
	if st.reserved && !st.stored {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.storeTimeout)
		err := m.store.unreserve(ctx, st.slot)
		cancel()
		if err != nil {
			m.report(r, ch, err)
		}
	}
	if !st.keep {
		if err := m.g.Release(r, st.lk); err != nil {
			m.report(r, ch, err)
		}
		return
	}
	// No renewal, and no release: the key stays busy (409) for one lease
	// from now, however long the handler goes on.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.storeTimeout)
	defer cancel()
	if err := st.lk.ReleaseAfter(ctx, st.lk.Lease()); err != nil {
		m.report(r, ch, err)
	}
}

// callerPart returns the caller's identity id as a key part. An identity
// is opaque: its bytes are escaped, so that it cannot run into another
// part, and never normalized, as a resource's text is (a Canon): two
// accounts whose names differ only in their Unicode spelling ("josé"
// precomposed and decomposed, "Kim" with a Kelvin sign) are two callers,
// with their own responses and quotas.
func callerPart(id string) string { return lockkey.Escape(id) }

// scope returns the key's scope: rest in the namespace of route (see the
// package comment), shortened.
func (m *Core) scope(r *http.Request, route, rest string) string {
	if route != "" || m.cfg.namespaceSet {
		return m.g.Key(route, rest)
	}
	// Not through the Guard, which caches a namespace per route: paths are
	// as many as clients care to send.
	return lockkey.Shorten(lockkey.EscapeRoute(r.Method+" "+r.URL.Path) + lockkey.Sep + rest)
}

// refuse writes p for r and reports the cause of a 5xx.
func (m *Core) refuse(w http.ResponseWriter, r *http.Request, ch Chain, p *httplock.Problem) {
	if p.Status >= 500 && p.Err != nil {
		m.report(r, ch, p.Err)
	}
	m.g.Refuse(w, r, p)
}

// report tells WithError's func and the face about err.
func (m *Core) report(r *http.Request, ch Chain, err error) {
	if m.cfg.onError != nil {
		m.cfg.onError(r, err)
	}
	ch.Error(err)
}

// answered answers from rec, the record lookup found (ok) or not, or from
// the lookup's err. It reports whether the request was answered (with the
// replay, 409, 422, or an error).
func (m *Core) answered(w http.ResponseWriter, r *http.Request, ch Chain, rec record, ok bool, err error, fp string) bool {
	switch {
	case errors.Is(err, errBadRecord):
		m.refuse(w, r, ch, newProblem(http.StatusInternalServerError, "the stored response for this Idempotency-Key cannot be read", err))
		return true
	case err != nil:
		m.refuse(w, r, ch, newProblem(http.StatusServiceUnavailable, "the idempotency store is unavailable", err))
		return true
	case !ok:
		return false
	case rec.fingerprint != fp:
		m.refuse(w, r, ch, newProblem(http.StatusUnprocessableEntity, "this Idempotency-Key was already used for a different request", nil))
	case rec.kind == recordNotReplayable:
		p := newProblem(http.StatusConflict, "a request with this Idempotency-Key was already processed, or started to be, "+
			"but its response was not kept and cannot be replayed; it is not run again", nil)
		p.RetryAfter = -1 // retrying will not help
		m.refuse(w, r, ch, p)
	default:
		h := w.Header()
		rec.writeHeader(h)
		h.Set(ReplayedHeader, "true")
		writeHeader(w, rec.status)
		_, _ = io.WriteString(w, rec.body)
	}
	return true
}

// run runs the rest of the chain holding st's lock, then stores and sends
// its response.
func (m *Core) run(w http.ResponseWriter, r *http.Request, ch Chain, st *inFlight, key, fp, recKey string) {
	before := w.Header().Clone()
	rec := newRecorder(w, m.cfg.maxResponse)
	// A lock or limiter behind this middleware reports through the watch
	// that it refused the request: the handler did not run.
	ctx, behind := refusal.With(st.lk.Context(r.Context()))
	locked := r.WithContext(context.WithValue(ctx, keyCtxKey{}, key))
	returned := false
	defer func() {
		if returned {
			return
		}
		// The chain panicked (or called runtime.Goexit): nothing is
		// stored, unless the response started to go out (or the handler
		// took the connection over), and the panic goes on, after this and
		// the release of the lock, to the router's recovery, as net/http
		// expects.
		out := rec.end()
		if out.hijacked || (out.committed && m.cfg.storeStatus(out.status)) {
			m.putMarker(r, ch, st, fp, recKey, out.status)
		}
	}()
	ch.Next(rec, locked)
	returned = true

	out := rec.end()
	refused := behind.Refused()
	switch {
	case out.hijacked:
		// The handler answered on the connection itself, whatever it
		// wrote: a retry must never run it again.
		m.putMarker(r, ch, st, fp, recKey, out.status)
	case out.committed:
		// Sent already, at least in part, and not kept: the marker stops
		// a retry from running the handler again, also when a status
		// change came late (a recovery behind the middleware answering a
		// panic after the handler flushed).
		if m.cfg.storeStatus(out.status) {
			m.putMarker(r, ch, st, fp, recKey, out.status)
		}
	case out.late || !m.cfg.storeStatus(out.status) || refused:
		w.Header().Set(ReplayableHeader, "false")
		send(w, out.status, out.body)
	default:
		rc := &record{kind: recordResponse, fingerprint: fp, status: out.status, header: handlerHeader(w.Header(), before, m.cfg.storedHeaders)}
		if !m.put(r, ch, st, recKey, rc, out.body) {
			w.Header().Set(ReplayableHeader, "false")
		}
		send(w, out.status, out.body)
	}
	// A refusal behind frees the key at once: nothing ran, and the retry
	// it asks for must be able to run.
	st.keep = !st.stored && !refused && unfinished(out.status)
}

// unfinished reports whether an answer with status, not stored, may have
// come while the handler still runs: 408, 503 and 504 are what timeout
// wrappers inside the middleware (http.TimeoutHandler, gin-contrib/timeout)
// answer while the handler goes on in a goroutine of theirs. The key then
// stays busy for one lease (see finish), so that a retry does not start a
// second run beside it.
func unfinished(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// errRecordTaken is what put reports when a record it was about to store
// is there already.
var errRecordTaken = errors.New("idempotency: a record for this key was stored by another request; the in-flight lock was lost")

// putMarker stores the marker of a response with status that was sent and
// not kept.
func (m *Core) putMarker(r *http.Request, ch Chain, st *inFlight, fp, recKey string, status int) {
	m.put(r, ch, st, recKey, &record{kind: recordNotReplayable, fingerprint: fp, status: status}, nil)
}

// put stores rc with body at recKey, counted in place of st's slot, on a
// context detached from the request, and reports whether it did.
func (m *Core) put(r *http.Request, ch Chain, st *inFlight, recKey string, rc *record, body []byte) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.storeTimeout)
	defer cancel()
	stored, err := m.store.putCounted(ctx, recKey, rc, body, m.cfg.quota, st.slot)
	switch {
	case err != nil:
		m.report(r, ch, err)
	case !stored:
		// Only when the in-flight lock was lost while the handler ran and
		// another request with the key finished first: its record stays.
		m.report(r, ch, errRecordTaken)
	}
	st.stored = stored
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

// newProblem returns a problem with status and detail, and err for logs.
func newProblem(status int, detail string, err error) *httplock.Problem {
	return &httplock.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Err: err}
}
