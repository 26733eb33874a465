package middleware

import (
	"net/http"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/keyfunc"
)

// LockHTTP is Lock for net/http routers (http.ServeMux, chi, or any
// func(http.Handler) http.Handler chain): it runs next while holding the lock
// on the key that key builds from the request. The default namespace is
// r.Pattern, which http.ServeMux sets when the middleware wraps the handler
// of one pattern (mux.Handle("POST /orders/{id}/pay", mw(pay))), not when it
// wraps the whole mux; other routers should set WithNamespace.
//
// next sees the lock through r.Context() (cancelled if the lock is lost) and
// padlock.FromContext. The lock is released when next returns or panics; a
// release error goes to WithReleaseError's func, and is dropped without one.
//
// LockHTTP panics if l or key is nil or an option is invalid, including
// WithSkip, which needs a *gin.Context (use WithSkipRequest).
func LockHTTP(l *padlock.Locker, key keyfunc.RequestFunc, opts ...Option) func(http.Handler) http.Handler {
	g := newGuard("LockHTTP", l, opts)
	if key == nil {
		panic("middleware: LockHTTP: nil key func")
	}
	if g.skip != nil {
		panic("middleware: LockHTTP: WithSkip needs a *gin.Context; use WithSkipRequest")
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("middleware: LockHTTP: nil next handler")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if g.skipRequest != nil && g.skipRequest(r) {
				next.ServeHTTP(w, r)
				return
			}
			k, err := key(r)
			if err != nil {
				g.refuse(w, r, keyProblem(err))
				return
			}
			lk, p := g.acquire(r.Context(), g.lockKey(r.Pattern, k))
			if p != nil {
				g.refuse(w, r, p)
				return
			}
			defer func() { _ = g.release(r, lk) }()
			next.ServeHTTP(w, r.WithContext(lk.Context(r.Context())))
		})
	}
}
