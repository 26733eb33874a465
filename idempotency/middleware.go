package idempotency

import (
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
)

// New returns a net/http middleware (for http.ServeMux, chi, or any
// func(http.Handler) http.Handler chain) that makes the handlers it wraps
// idempotent under the Idempotency-Key header; see the package comment for
// what a request gets. l holds the in-flight locks and rdb stores the
// responses; neither is owned by the middleware. Put it after the
// authentication step:
//
//	idem := idempotency.New(locker, rdb, userID)
//	mux.Handle("POST /orders", authenticate(idem(http.HandlerFunc(createOrder))))
//
// caller returns the identity of the authenticated caller (user, API
// client, tenant), as the authentication step in front established it,
// usually from r.Context(); keys are scoped by it, byte for byte (never
// normalized), so a caller only ever gets its own responses replayed. It
// returns "" when the request carries
// no identity, which is refused with 401: a request that is not
// authenticated never shares a scope with anyone. Never take the caller
// from what a client sends unauthenticated (a header such as X-Client-ID):
// whoever copies it gets the other caller's responses, and can squat its
// keys.
//
// Keys are scoped by the route pattern, r.Pattern, which http.ServeMux sets
// when the middleware wraps the handler of one pattern and chi when it
// mounts the middleware on a route (With), unless WithNamespace says
// otherwise; where the router has set none yet, by the method and path
// (see the package comment for what that means).
//
// The handler sees the in-flight lock through r.Context() (cancelled if it
// is lost) and padlock.FromContext, and the key through KeyFrom.
//
// New panics if l, rdb or caller is nil or an option is invalid.
func New(l *padlock.Locker, rdb redis.UniversalClient, caller func(r *http.Request) (string, error), opts ...Option) func(http.Handler) http.Handler {
	m := newCore("New", l, rdb, opts)
	if caller == nil {
		panic("idempotency: New: nil caller func; pass the authenticated identity (see New)")
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("idempotency: New: nil next handler")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.Serve(w, r, &httpChain{r: r, next: next, caller: caller})
		})
	}
}

// httpChain is a net/http request's Chain.
type httpChain struct {
	r      *http.Request
	next   http.Handler
	caller func(r *http.Request) (string, error)
}

func (c *httpChain) Route() string { return c.r.Pattern }

func (c *httpChain) Caller() (string, error) { return c.caller(c.r) }

func (c *httpChain) Body(limit int64) ([]byte, error) { return lockkey.ReadBody(c.r, limit) }

func (c *httpChain) Next(w http.ResponseWriter, r *http.Request) { c.next.ServeHTTP(w, r) }

func (c *httpChain) Error(error) {}
