package middleware

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/httplock"
)

// KeyFor returns the key the first Lock or Limit on r's route of e would
// lock, as Lock passes it to padlock.Locker.Acquire: the route template
// as lockkey.EscapeRoute writes it (c.FullPath(), ':' written '$'), then
// the keyfunc.Func's escaped parts, "/orders/$id/pay:42" for
// r.POST("/orders/:id/pay", Lock(l, keyfunc.Param("id", lockkey.Int(64))))
// and a request for /orders/042/pay. Tests use it to steer the lock a
// request takes (padlocktest's BusyFor and LoseFor) without guessing its
// key.
//
// It is httplock.KeyFor, which takes any http.Handler, a gin.Engine
// included: r goes through e's middlewares up to the lock, which answers
// instead of taking it, and no handler behind the lock runs. A route
// without a Lock or Limit runs its handlers, and KeyFor returns
// httplock.ErrNoLock.
func KeyFor(e *gin.Engine, r *http.Request) (string, error) {
	if e == nil {
		return httplock.KeyFor(nil, r)
	}
	return httplock.KeyFor(e, r)
}
