package middleware

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/httplock"
)

// Caller returns the identity of the authenticated caller of c's request
// (a user, an API client, a tenant), as the authentication handler in
// front of the middlewares established it (with c.Set, say), or "" when
// the request carries none. An error says the identity could not be
// told. Take it from authentication, never from a header the client sends
// unchecked.
//
// One Caller serves both Gin faces that need to know who calls:
// WithCallerFrom names the caller in the locks Lock and Limit take, and
// ginidem.New (package padlock/idempotency/ginidem) scopes Idempotency-Keys
// by it, refusing "" with 401 and an error with 500. A Caller must be safe
// for concurrent use, and cheap: it runs on each request's goroutine.
type Caller func(c *gin.Context) (string, error)

// WithCallerFrom is httplock.WithCaller for Gin, with the Caller that
// ginidem.New takes too: each lock Lock and Limit take names fn's identity
// of the caller as a keyed hash, "caller=#3fa9c1e2d4b5", after the route
// template (see httplock.WithRedactor), never as it is. When fn returns ""
// or an error the lock names the route only: naming a holder is not
// authentication, and refusing a caller is the authentication handler's
// task, in front. A nil fn panics (the middleware is being built).
// Default: none, and the lock names the route only.
func WithCallerFrom(fn Caller) httplock.Option {
	if fn == nil {
		panic("middleware: WithCallerFrom: nil Caller")
	}
	return httplock.WithCaller(func(ctx context.Context, _ *http.Request) string {
		c, ok := ctx.(*gin.Context)
		if !ok {
			return "" // a net/http face: no gin.Context to read
		}
		id, err := fn(c)
		if err != nil {
			return ""
		}
		return id
	})
}
