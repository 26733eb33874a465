package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

// Defaults of the middleware.
const (
	// DefaultRetention is how long a stored response is replayed.
	DefaultRetention = 24 * time.Hour

	// DefaultMaxResponseBytes is the largest response body stored for
	// replay: 1 MiB.
	DefaultMaxResponseBytes = 1 << 20

	// DefaultRecordPrefix starts the Redis key of every stored record.
	DefaultRecordPrefix = "padlock:idempotency:"
)

// Fingerprint returns what identifies a request's payload, so that the same
// Idempotency-Key sent with a different request is refused (422) instead of
// answered with another request's response. body is the request body,
// already read and bounded (see WithMaxBodyBytes). The result is stored with
// the response: return a digest, not the payload. An error from the lockkey
// package (ErrMalformedBody, ErrMissingPart, ErrInvalidPart) refuses the
// request with 400; any other error with 500.
type Fingerprint func(r *http.Request, body []byte) (string, error)

// An Option configures the middleware (New, NewCore, and the Gin face
// ginidem.New). Options are checked once, when the middleware is built; an
// invalid one panics there with a message naming it.
type Option func(*config)

type config struct {
	optional      bool
	fingerprint   Fingerprint
	retention     time.Duration
	maxResponse   int
	maxBody       int64
	prefix        string
	wait          time.Duration
	storeTimeout  time.Duration
	storeStatus   func(status int) bool
	lockTTL       time.Duration
	respond       httplock.Responder // nil: httplock.WriteProblem
	namespace     string
	namespaceSet  bool
	onError       func(r *http.Request, err error) // nil: none
	storedHeaders map[string]bool                  // canonical names
	quota         quota
	redactor      *lockkey.Redactor // nil: the process's
	errs          []string
}

func (c *config) invalid(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// WithRedactor hashes the caller that each in-flight lock names as its
// holder with r. The lock carries "route=<template> caller=#<hash>" after
// the Locker's Owner, never the caller's identity as it is, so that the
// lock page (lockview), Locker.Inspect and a request refused meanwhile
// (padlock.NotAcquiredError.Holder) tell which caller's request is in
// flight. Share r with the lock page, the logs and the lock middlewares
// (httplock.WithRedactor), with a secret the fleet shares, so that a
// caller has one hash everywhere. A nil r is the process's Redactor.
// Default: the process's Redactor, with a random secret (see
// lockkey.Redactor).
func WithRedactor(r *lockkey.Redactor) Option {
	return func(c *config) { c.redactor = r }
}

// WithOptionalKey lets requests without an Idempotency-Key through: they
// run the handler with no idempotency at all. Default: the key is
// required, and a request without one gets 400, as the draft says for
// operations that document the key as required.
func WithOptionalKey() Option {
	return func(c *config) { c.optional = true }
}

// WithFingerprint sets how a request's payload is fingerprinted. A nil fn
// panics at construction. Default: the SHA-256 of the method, the request
// URI (escaped path and query, as sent), the Content-Type (its type in
// lower case, parameters sorted) and the body, so the key reused for
// another resource on the same route (/orders/1/pay, then /orders/2/pay),
// with another body, or with the same body as another media type
// (text/plain for a JSON request) is refused with 422. Set it to ignore fields that
// legitimately change between retries (a client timestamp).
func WithFingerprint(fn Fingerprint) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithFingerprint: nil Fingerprint")
		}
		c.fingerprint = fn
	}
}

// WithRetention sets how long a stored response is kept and replayed, from
// when the first request finished. A retry after that runs the handler
// again. It must be at least 1ms. Default: DefaultRetention (24h).
func WithRetention(d time.Duration) Option {
	return func(c *config) { c.retention = d }
}

// WithMaxResponseBytes sets the largest response body that is stored for
// replay; it bounds the memory a request holds too, since the response is
// held back until it is stored. A larger response is still sent in full (it
// streams once it passes n bytes), carrying "Idempotent-Replayable: false";
// what is stored then is a marker, and a retry with the same key gets 409
// saying the request was processed but its response cannot be replayed, so
// the handler never runs twice. It must be positive. Default:
// DefaultMaxResponseBytes (1 MiB).
func WithMaxResponseBytes(n int) Option {
	return func(c *config) { c.maxResponse = n }
}

// WithMaxBodyBytes sets the largest request body the middleware reads to
// fingerprint; a larger one is refused with 413 before the handler runs.
// The body stays readable by the handler (under Gin, it is also cached
// under gin.BodyBytesKey for c.ShouldBindBodyWith). It must be positive.
// Default: lockkey.DefaultMaxBodyBytes (1 MiB).
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) { c.maxBody = n }
}

// WithRecordPrefix sets the start of the Redis key of every stored record.
// It must not be empty, and must not contain '{' or '}', which would change
// the keys' Cluster hash slots. Default: DefaultRecordPrefix.
func WithRecordPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithWaitForInFlight makes a request whose key is in flight (an earlier
// request with it is still running) wait up to d for that request to
// finish, and then get its replay, instead of 409 at once. With a wait,
// identical requests sent at once all get the same answer from one run of
// the handler; a request still waiting after d gets 409. It must not be
// negative. Default: 0, the draft's behaviour: 409 Conflict with
// Retry-After at once.
func WithWaitForInFlight(d time.Duration) Option {
	return func(c *config) { c.wait = d }
}

// WithInFlightTTL sets the lease of the in-flight lock: how long a key stays
// busy (409) after the process running its first request died, before a
// retry can run it. While the handler runs the lease is renewed, so a slow
// handler keeps its key. After an answer of 408, 503 or 504 that is not
// stored, which a timeout inside the middleware sends while the handler
// runs on, the key stays busy for one more lease, unrenewed (see the
// package comment). It must be at least 1ms. Default: the Locker's lease
// (padlock.WithDefaults; 30s unless set there).
func WithInFlightTTL(d time.Duration) Option {
	return func(c *config) { c.lockTTL = d }
}

// WithStoreTimeout bounds the write of the record after the handler, and
// the release of the in-flight lock. Both run on a context detached from
// the request, so a client that went away still gets its response stored
// for its retry. It must be positive. Default:
// httplock.DefaultReleaseTimeout (5s).
func WithStoreTimeout(d time.Duration) Option {
	return func(c *config) { c.storeTimeout = d }
}

// WithStoreStatus sets which response statuses are stored and replayed. A
// status it rejects is sent with "Idempotent-Replayable: false" and not
// stored, so a retry runs the handler again. Whatever it says, the
// refusal of a lock or limiter of this module behind this middleware
// (httplock.Lock's and middleware.Lock's 409 or 423, Limit's 429 or 503,
// and their 503 or 500 when the lock cannot be taken) is not stored and
// frees the key at once: the handler did not run, and the retry it asks
// for must. The handler's own answers follow fn, Retry-After or not: a
// 202 Accepted that says when to check back is stored and replayed like
// any 2xx. A nil fn panics at construction. Default: DefaultStoreStatus.
func WithStoreStatus(fn func(status int) bool) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithStoreStatus: nil func")
		}
		c.storeStatus = fn
	}
}

// WithResponder sets the function that writes refusals (400, 409, 413,
// 422, 503 and the like), as httplock.WithResponder does for the lock
// middleware. It must write a response; the Gin face aborts the chain
// after it. Replays are not refusals and do not go through it. A nil fn
// panics at construction. Default: httplock.WriteProblem.
func WithResponder(fn httplock.Responder) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithResponder: nil Responder")
		}
		c.respond = fn
	}
}

// WithNamespace sets the namespace that scopes keys in place of the route:
// two routes with the same namespace share their keys (and refuse with 422
// a key reused across them, since the fingerprint holds the method and
// URI), and "" means no namespace at all. Default: the route template, as
// the router reports it (see New and ginidem.New), or where it reports
// none, the method and path (see the package comment).
func WithNamespace(ns string) Option {
	return func(c *config) { c.namespace, c.namespaceSet = ns, true }
}

// WithError sets a function that is told the errors the client does not
// see: the cause of a 5xx refusal, a record that could not be stored, an
// in-flight lock whose release failed. fn runs on the request's goroutine,
// so concurrently for concurrent requests; it must be safe for concurrent
// use. The Gin face adds these errors to c.Errors as well. A nil fn panics
// at construction. Default: none.
func WithError(fn func(r *http.Request, err error)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid("WithError: nil func")
		}
		c.onError = fn
	}
}

// DefaultStoreStatus stores every status below 500 but 400 Bad Request,
// 422 Unprocessable Content, 408 Request Timeout and 429 Too Many
// Requests. Successes and the handler's other client errors (a 404, a 409)
// are the answer every retry gets. A 400 or 422 says the request failed
// validation and the handler did nothing, so it is not stored: a retry
// with the same key and a corrected request runs (Stripe's rule), instead
// of getting 422 for a key "used with a different request". 408 and 429
// are transient refusals a client is expected to retry. A 5xx is not
// stored because a retry of a failed request should get a chance to
// succeed; the handler must then be safe to run again after a 5xx (roll
// back, or fail before the side effect), or the app should store 5xx too.
// After a 408, 503 or 504, a retry runs only once the key's in-flight lease
// ran out (see WithInFlightTTL).
//
// A handler that acts before it can answer 400 or 422 (it charged, then
// found a field wrong) should store those too: WithStoreStatus with
// StrictStoreStatus.
func DefaultStoreStatus(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return false
	}
	return StrictStoreStatus(status)
}

// StrictStoreStatus stores every status below 500 but 408 Request Timeout
// and 429 Too Many Requests: a 400 or 422 from the handler is replayed to
// every retry with its key, so a corrected request needs a new key. Use it
// with WithStoreStatus where a validation error can follow a side effect.
func StrictStoreStatus(status int) bool {
	return status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// WithStoredHeaders adds response header fields to those stored with a
// response and replayed. By default only these are: Cache-Control,
// Content-Disposition, Content-Encoding, Content-Language,
// Content-Location, Content-Type, ETag, Expires, Last-Modified, Link,
// Location, Preference-Applied and Vary. Any other field the handler sets
// reaches the first response only. A name that may carry credentials or a
// session (one holding "auth", "cookie", "session", "token", "secret",
// "password", "credential", "api-key", "csrf": Set-Cookie, Authorization,
// Authentication-Info, X-Session-Token), or one that belongs to the
// connection (Connection, Date, Content-Length, Transfer-Encoding ...),
// panics at construction: a replay never hands out credentials.
func WithStoredHeaders(names ...string) Option {
	return func(c *config) {
		for _, n := range names {
			if n == "" {
				c.invalid("WithStoredHeaders: empty name")
				continue
			}
			if why := storableHeader(n); why != "" {
				c.invalid("WithStoredHeaders: %q %s; it is never stored", n, why)
				continue
			}
			c.storedHeaders[http.CanonicalHeaderKey(n)] = true
		}
	}
}

// WithQuota bounds what one caller keeps stored, so that one caller cannot
// fill Redis with responses (each kept for WithRetention): at most
// responses records and bytes bytes of records and their keys at once,
// across every route with the same WithRecordPrefix; 0 turns a bound off,
// and WithQuota(0, 0) turns the quota off. A request that would run the
// handler while its caller is at either bound gets 429 Too Many Requests
// with Retry-After (when its oldest record expires), before the handler
// runs: a response that could not be stored would leave a retry free to
// run the handler again. Replays are never refused.
//
// The count is a bound, also for requests sent at once: a request reserves
// its place atomically before its handler runs, the record of its response
// takes the place over, and a request that stores nothing (a 5xx, a 400 or
// 422, a panic before anything was sent) frees it. A process that dies
// while its handler runs leaves its place taken until WithRetention ends,
// as a stored response would. The bytes of a response are known only once
// it is stored, so the bytes bound is checked before the handler runs and
// can be passed by at most the responses then in flight (each at most
// WithMaxResponseBytes). The reservation shares a round trip with the
// second GET and the count with the store; freeing a place costs one.
// Negative values panic at construction. Default: DefaultQuotaResponses
// (10000) and DefaultQuotaBytes (64 MiB).
func WithQuota(responses int, bytes int64) Option {
	return func(c *config) {
		if responses < 0 || bytes < 0 {
			c.invalid("WithQuota: %d responses, %d bytes, want >= 0", responses, bytes)
		}
		c.quota = quota{responses: responses, bytes: bytes}
	}
}

// newConfig applies opts and validates the result, panicking with a
// message that names fn, the function the app called, and the option at
// fault.
func newConfig(fn string, opts []Option) config {
	fail := func(format string, args ...any) {
		panic(fmt.Sprintf("idempotency: %s: %s", fn, fmt.Sprintf(format, args...)))
	}
	c := config{
		fingerprint:   defaultFingerprint,
		retention:     DefaultRetention,
		maxResponse:   DefaultMaxResponseBytes,
		maxBody:       lockkey.DefaultMaxBodyBytes,
		prefix:        DefaultRecordPrefix,
		storeTimeout:  httplock.DefaultReleaseTimeout,
		storeStatus:   DefaultStoreStatus,
		respond:       httplock.WriteProblem,
		storedHeaders: make(map[string]bool, len(defaultStoredHeaders)),
		quota:         quota{responses: DefaultQuotaResponses, bytes: DefaultQuotaBytes},
	}
	for _, n := range defaultStoredHeaders {
		c.storedHeaders[n] = true
	}
	for i, o := range opts {
		if o == nil {
			fail("option %d is nil", i+1)
		}
		o(&c)
	}
	switch {
	case len(c.errs) > 0:
		fail("%s", c.errs[0])
	case c.retention < time.Millisecond:
		fail("WithRetention: %v, want >= 1ms", c.retention)
	case c.maxResponse <= 0:
		fail("WithMaxResponseBytes: %d, want > 0", c.maxResponse)
	case c.maxBody <= 0:
		fail("WithMaxBodyBytes: %d, want > 0", c.maxBody)
	case c.prefix == "" || strings.ContainsAny(c.prefix, "{}"):
		fail("WithRecordPrefix: %q, want a non-empty prefix without '{' or '}'", c.prefix)
	case c.wait < 0:
		fail("WithWaitForInFlight: %v, want >= 0", c.wait)
	case c.lockTTL != 0 && c.lockTTL < time.Millisecond:
		fail("WithInFlightTTL: %v, want >= 1ms", c.lockTTL)
	case c.storeTimeout <= 0:
		fail("WithStoreTimeout: %v, want > 0", c.storeTimeout)
	}
	return c
}

// defaultFingerprint is the SHA-256 of the method, the request URI, the
// Content-Type and the body, each but the last length-prefixed so that no
// two requests hash the same input. The Content-Type is in it because the
// same bytes are another request under another type: a body sent as
// text/plain (which a cross-site form can send) must not replay the answer
// to the JSON request.
func defaultFingerprint(r *http.Request, body []byte) (string, error) {
	var buf [256]byte
	b := appendField(buf[:0], r.Method)
	b = appendField(b, r.URL.EscapedPath())
	b = appendField(b, r.URL.RawQuery)
	b = binary.AppendUvarint(b, uint64(len(r.Header["Content-Type"])))
	for _, v := range r.Header["Content-Type"] {
		b = appendField(b, mediaType(v))
	}
	h := sha256.New()
	_, _ = h.Write(b)
	_, _ = h.Write(body)
	var sum [sha256.Size]byte
	return string(h.Sum(sum[:0])), nil
}

// mediaType returns the Content-Type field v in one spelling: the type in
// lower case and its parameters sorted, so that a retry that spells the
// same type differently ("Application/JSON; charset=UTF-8") is the same
// request. A value that does not parse is used as it is.
func mediaType(v string) string {
	if strings.IndexByte(v, ';') < 0 {
		return strings.ToLower(strings.TrimSpace(v)) // no allocation when already so
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil {
		return v
	}
	for k, p := range params {
		if k == "charset" {
			params[k] = strings.ToLower(p)
		}
	}
	if f := mime.FormatMediaType(mt, params); f != "" {
		return f
	}
	return v
}

func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
