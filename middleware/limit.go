package middleware

import (
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/keyfunc"
)

// Limit returns a Gin middleware that caps how many requests for one key
// run at once: it runs the rest of the chain while holding one of the
// permits of s for the key that key builds from the request, namespaced
// by route as Lock's keys are. With every permit taken (after waiting up
// to WithLockOptions' Wait) it aborts the chain with a problem response
// of status full, http.StatusTooManyRequests (429) or
// http.StatusServiceUnavailable (503), and a Retry-After header. Limit
// is the Gin face of httplock.Limiter; opts are httplock's
// (WithBusyStatus does not apply).
//
// For at most 3 calls at once to a payment provider per merchant:
//
//	sem, _ := locker.Semaphore(3)
//	r.POST("/merchants/:id/pay", middleware.Limit(sem, keyfunc.Param("id", lockkey.Int(64)), http.StatusTooManyRequests), pay)
//
// The handler sees its permit through c.Request.Context() (cancelled if
// the permit is lost) and LockFrom. The permit is given back when the
// chain returns or panics; a release error is added to c.Errors and told
// to httplock.WithReleaseError's func.
//
// Limit panics if s or key is nil, full is another status or an option is
// invalid.
func Limit(s *padlock.Semaphore, key keyfunc.Func, full int, opts ...httplock.Option) gin.HandlerFunc {
	if key == nil {
		panic("middleware: Limit: nil key func")
	}
	lm := newLimiter(s, full, opts...)
	return func(c *gin.Context) {
		if lm.Skip(c.Request) {
			return
		}
		k, err := key(c)
		if err != nil {
			abort(lm.Guard, c, httplock.KeyProblem(err))
			return
		}
		req := c.Request
		route := c.FullPath()
		lk, p := lm.AcquireAs(req.Context(), lm.Key(route, k), lm.Caller(c, req, route))
		if p != nil {
			abort(lm.Guard, c, p)
			return
		}
		held := req.WithContext(lk.Context(req.Context()))
		c.Request = held
		defer func() {
			if c.Request == held {
				c.Request = req
			}
			if err := lm.Release(req, lk); err != nil {
				_ = c.Error(err)
			}
		}()
		c.Next()
	}
}

// newLimiter is httplock.NewLimiter, its construction panics naming
// Limit, the function the app called.
func newLimiter(s *padlock.Semaphore, full int, opts ...httplock.Option) *httplock.Limiter {
	defer func() {
		if v := recover(); v != nil {
			if msg, ok := v.(string); ok {
				panic("middleware: Limit: " + strings.TrimPrefix(msg, "httplock: NewLimiter: "))
			}
			panic(v)
		}
	}()
	return httplock.NewLimiter(s, full, opts...)
}
