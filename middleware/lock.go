package middleware

import (
	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/keyfunc"
)

// Lock returns a Gin middleware that runs the rest of the chain while
// holding the lock on the key that key builds from the request, namespaced
// by route (see WithNamespace). When it cannot take the lock it aborts the
// chain with a problem response (see the package comment); the chain never
// runs without the lock.
//
// The handler sees the lock through c.Request.Context() (cancelled if the
// lock is lost; see padlock.Lock.Context) and LockFrom. The lock is released
// when the chain returns or panics; a release error (the lock was lost, Redis
// is down) is added to c.Errors and told to WithReleaseError's func.
//
// Lock panics if l or key is nil or an option is invalid.
func Lock(l *padlock.Locker, key keyfunc.Func, opts ...Option) gin.HandlerFunc {
	g := newGuard("Lock", l, opts)
	if key == nil {
		panic("middleware: Lock: nil key func")
	}
	return func(c *gin.Context) {
		if (g.skip != nil && g.skip(c)) || (g.skipRequest != nil && g.skipRequest(c.Request)) {
			return // gin runs the rest of the chain
		}
		k, err := key(c)
		if err != nil {
			g.abort(c, keyProblem(err))
			return
		}
		req := c.Request
		lk, p := g.acquire(req.Context(), g.lockKey(c.FullPath(), k))
		if p != nil {
			g.abort(c, p)
			return
		}
		locked := req.WithContext(lk.Context(req.Context()))
		c.Request = locked
		// Deferred, so it also runs when the chain panics; the panic then
		// goes on to gin's recovery.
		defer func() {
			if c.Request == locked {
				// Handlers before this one see the request they passed on,
				// not a context cancelled by the release.
				c.Request = req
			}
			if err := g.release(req, lk); err != nil {
				_ = c.Error(err)
			}
		}()
		c.Next()
	}
}

func (g *guard) abort(c *gin.Context, p *Problem) {
	if p.Status >= 500 && p.Err != nil {
		_ = c.Error(p.Err)
	}
	g.refuse(c.Writer, c.Request, p)
	c.Abort()
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
