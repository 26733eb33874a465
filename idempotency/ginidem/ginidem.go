package ginidem

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/keyfunc"
)

// New returns a Gin middleware that makes a route idempotent under the
// Idempotency-Key header (see package idempotency for what a request
// gets). l holds the in-flight locks and rdb stores the responses; neither
// is owned by the middleware. Put it after the authentication step:
//
//	r.POST("/orders", auth, ginidem.New(locker, rdb, userID), createOrder)
//
// caller returns the identity of the authenticated caller (user, API
// client, tenant), as the authentication middleware in front established
// it (c.Get, c.Request.Context()); keys are scoped by it, byte for byte
// (never normalized), so a caller only ever gets its own responses
// replayed. It returns "" when the request
// carries no identity, which is refused with 401: a request that is not
// authenticated never shares a scope with anyone. Never take the caller
// from what a client sends unauthenticated (a header such as X-Client-ID):
// whoever copies it gets the other caller's responses, and can squat its
// keys. caller has the shape of middleware.Caller (package
// padlock/middleware): pass one Caller here and to
// middleware.WithCallerFrom, and the lock behind this middleware names the
// same caller (see ExampleNew_withLock for the whole stack).
//
// rdb is where the responses are kept: the client l was made with
// (NewFromLocker takes it from l, Locker.Client), or, for a Redlock
// Locker, whose clients are independent nodes none of which alone may
// keep a record, the one Redis the app chooses to keep them.
//
// Keys are scoped by the route template, c.FullPath(), unless
// idempotency.WithNamespace says otherwise.
//
// The handler sees the in-flight lock through c.Request.Context()
// (cancelled if it is lost) and padlock.FromContext, and the key through
// KeyFrom; it can still bind the body. Errors the client does not see (a
// record that could not be stored, a failed release, the cause of a 5xx)
// are added to c.Errors.
//
// A panicking handler stores nothing: the lock is released, the panic goes
// on to gin's recovery, and a retry runs the handler again. Put the
// recovery in front of this middleware (r.Use(gin.Recovery()) first), so
// the client gets the recovery's clean 500. Behind it works too: the
// recovery's 500 is not stored, nor is a response whose status someone
// tried to change after the body started, which is how a panic after a
// partial write shows. Either way, once the response started to go out
// (the handler flushed, or wrote more than WithMaxResponseBytes) a panic
// leaves the marker of a response that cannot be replayed: a retry gets
// 409, never a second run.
//
// Put timeouts in front of this middleware too, never between it and the
// handler: see "Timeouts and the order of middlewares" in package
// idempotency.
//
// New panics if l, rdb or caller is nil or an option is invalid.
func New(l *padlock.Locker, rdb redis.UniversalClient, caller func(c *gin.Context) (string, error), opts ...idempotency.Option) gin.HandlerFunc {
	m := newCore(l, rdb, opts)
	if caller == nil {
		panic("ginidem: New: nil caller func; pass the authenticated identity (see New)")
	}
	return func(c *gin.Context) {
		if !m.Serve(c.Writer, c.Request, &chain{c: c, caller: caller}) {
			c.Abort()
		}
	}
}

// NewFromLocker is New with the records kept through the client l was
// made with (Locker.Client), so that a Gin app passes its Redis once.
// It panics, as New does, on a nil l or caller or an invalid option, and
// on a Locker from padlock.NewRedlock, which has no one client to keep
// the records: pass one to New instead.
func NewFromLocker(l *padlock.Locker, caller func(c *gin.Context) (string, error), opts ...idempotency.Option) gin.HandlerFunc {
	if l == nil {
		panic("ginidem: NewFromLocker: nil Locker")
	}
	rdb := l.Client()
	if rdb == nil {
		panic("ginidem: NewFromLocker: a Redlock Locker has no one client to keep the records: use New with one")
	}
	return New(l, rdb, caller, opts...)
}

// newCore is idempotency.NewCore; its construction panics name New, the
// function the app called.
func newCore(l *padlock.Locker, rdb redis.UniversalClient, opts []idempotency.Option) *idempotency.Core {
	defer func() {
		if v := recover(); v != nil {
			if msg, ok := v.(string); ok {
				panic("ginidem: New: " + strings.TrimPrefix(msg, "idempotency: NewCore: "))
			}
			panic(v)
		}
	}()
	return idempotency.NewCore(l, rdb, opts...)
}

// keyKey is the gin context key of the request's Idempotency-Key.
type keyKey struct{}

// KeyFrom returns the Idempotency-Key of a request the middleware let
// through to the handler, unquoted, or "" when there is none (no key on a
// WithOptionalKey route, or no middleware on the route). Middlewares in
// front of this one can read it too, after c.Next.
func KeyFrom(c *gin.Context) string {
	if c == nil {
		return ""
	}
	k, _ := c.Get(keyKey{})
	s, _ := k.(string)
	return s
}

// chain is a Gin request's idempotency.Chain.
type chain struct {
	c      *gin.Context
	caller func(c *gin.Context) (string, error)
}

func (ch *chain) Route() string { return ch.c.FullPath() }

func (ch *chain) Caller() (string, error) { return ch.caller(ch.c) }

// Body reads the body through keyfunc.ReadBody, so bytes an earlier
// c.ShouldBindBodyWith kept are reused and the handler's is served from
// those read here.
func (ch *chain) Body(limit int64) ([]byte, error) { return keyfunc.ReadBody(ch.c, limit) }

func (ch *chain) Error(err error) { _ = ch.c.Error(err) }

// Next runs the rest of the chain with w, the writer that holds the
// response back, and r, the request carrying the lock, and gives handlers
// in front their own back afterwards.
func (ch *chain) Next(w http.ResponseWriter, r *http.Request) {
	c := ch.c
	req, orig := c.Request, c.Writer
	var gw gin.ResponseWriter = orig
	if rec, ok := w.(recorder); ok && w != http.ResponseWriter(orig) {
		gw = &writer{recorder: rec, orig: orig}
	}
	c.Request, c.Writer = r, gw
	if k := idempotency.KeyFrom(r.Context()); k != "" {
		c.Set(keyKey{}, k)
	}
	// Deferred, so it also runs when the chain panics.
	defer func() {
		if c.Writer == gw {
			c.Writer = orig
		}
		if c.Request == r {
			c.Request = req
		}
	}()
	c.Next()
}
