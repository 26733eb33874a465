package middleware

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/keyfunc"
)

// Lock returns a Gin middleware that runs the rest of the chain while
// holding the lock on the key that key builds from the request, namespaced
// by route (see httplock.WithNamespace). When it cannot take the lock it
// aborts the chain with a problem response (see the package comment); the
// chain never runs without the lock. opts are httplock's: Lock is the Gin
// face of httplock.Guard.
//
// The handler sees the lock through c.Request.Context() (cancelled if the
// lock is lost; see padlock.Lock.Context) and LockFrom. The lock is released
// when the chain returns or panics; a release error (the lock was lost, Redis
// is down) is added to c.Errors and told to httplock.WithReleaseError's
// func.
// httplock.WithMaxHold bounds how long one request may hold the lock, and
// httplock.WithReadBody reads the body before the lock is taken.
//
// Lock panics if l or key is nil or an option is invalid.
func Lock(l *padlock.Locker, key keyfunc.Func, opts ...httplock.Option) gin.HandlerFunc {
	if key == nil {
		panic("middleware: Lock: nil key func")
	}
	g := newGuard("Lock", l, opts...)
	return func(c *gin.Context) {
		if g.Skip(c.Request) {
			return // gin runs the rest of the chain
		}
		if p := g.ReadBody(c.Request); p != nil {
			abort(g, c, p)
			return
		}
		k, err := key(c)
		if err != nil {
			abort(g, c, httplock.KeyProblem(err))
			return
		}
		req, w := c.Request, c.Writer
		route := c.FullPath()
		h, p := g.HoldAs(req, g.Key(route, k), g.Caller(c, req, route))
		if p != nil {
			abort(g, c, p)
			return
		}
		locked := req.WithContext(h.Context())
		c.Request = locked
		var hw *holdWriter
		if g.MaxHold() > 0 {
			hw = &holdWriter{ResponseWriter: w, h: h}
			c.Writer = hw
		}
		returned := false
		// Deferred, so it also runs when the chain panics; the panic then
		// goes on to gin's recovery.
		defer func() {
			// Handlers before this one see the request and writer they
			// passed on, not a context cancelled by the release.
			if c.Request == locked {
				c.Request = req
			}
			if hw != nil && c.Writer == hw {
				c.Writer = w
			}
			if err := h.Release(); err != nil {
				_ = c.Error(err)
			}
			if p := h.Problem(); p != nil && returned {
				// Headers the handler set belong to an answer that never
				// went out.
				clear(w.Header())
				abort(g, c, p)
			}
		}()
		c.Next()
		returned = true
	}
}

// newGuard is httplock.NewGuard, its construction panics naming fn of this
// package, the function the app called.
func newGuard(fn string, l *padlock.Locker, opts ...httplock.Option) *httplock.Guard {
	defer func() {
		if v := recover(); v != nil {
			if msg, ok := v.(string); ok {
				panic("middleware: " + fn + ": " + strings.TrimPrefix(msg, "httplock: NewGuard: "))
			}
			panic(v)
		}
	}()
	return httplock.NewGuard(l, opts...)
}

// abort refuses c's request with p and stops the chain.
func abort(g *httplock.Guard, c *gin.Context, p *httplock.Problem) {
	if p.Status >= 500 && p.Err != nil {
		_ = c.Error(p.Err)
	}
	g.Refuse(c.Writer, c.Request, p)
	c.Abort()
}

// WithCaller is httplock.WithCaller for Gin: fn returns the identity of
// the caller of c's request (what the authentication handler before the
// lock set with c.Set, say), "" when it does not know, and each lock Lock
// and Limit take names it as a keyed hash, "caller=#3fa9c1e2d4b5", after
// the route template (see httplock.WithRedactor), never as it is. fn must
// be safe for concurrent use, and cheap. A nil fn panics at construction.
// Default: none, and the lock names the route only.
//
// Deprecated: use WithCallerFrom, whose Caller ginidem.New takes too, so
// one func of the authentication's identity serves both faces.
func WithCaller(fn func(c *gin.Context) string) httplock.Option {
	if fn == nil {
		return httplock.WithCaller(nil)
	}
	return httplock.WithCaller(func(ctx context.Context, _ *http.Request) string {
		if c, ok := ctx.(*gin.Context); ok {
			return fn(c)
		}
		return "" // a net/http face: no gin.Context to read
	})
}

// LockFrom returns the lock Lock holds for the request, or nil when the
// request holds none (skipped, or no Lock on its route). With nested Lock
// middlewares it is the innermost.
func LockFrom(c *gin.Context) *padlock.Lock {
	if c == nil || c.Request == nil {
		return nil
	}
	return padlock.FromContext(c.Request.Context())
}
