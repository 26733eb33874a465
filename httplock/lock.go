package httplock

import (
	"net/http"

	"github.com/padlockgo/padlock"
)

// Lock returns a net/http middleware (for http.ServeMux, chi, or any
// func(http.Handler) http.Handler chain) that runs next while holding the
// lock on the key that key builds from the request. The default namespace
// is r.Pattern, which http.ServeMux sets when the middleware wraps the
// handler of one pattern (mux.Handle("POST /orders/{id}/pay", mw(pay))),
// not when it wraps the whole mux; other routers should set WithNamespace.
// When it cannot take the lock it answers with a problem (see the package
// comment); next never runs without the lock.
//
// next sees the lock through r.Context() (cancelled if the lock is lost) and
// padlock.FromContext. The lock is released when next returns or panics; a
// release error goes to WithReleaseError's func, and is dropped without one.
// With WithMaxHold it is no longer renewed past that bound, so it ends at
// most one lease later even if next never returns (it is never released
// while next runs), and with WithReadBody the body is read before the lock
// is taken: a client then cannot keep the lock for as long as it likes by
// sending its body, or reading the answer, slowly.
//
// Lock panics if l or key is nil or an option is invalid.
func Lock(l *padlock.Locker, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	g := newGuard("Lock", l, opts)
	if key == nil {
		panic("httplock: Lock: nil key func")
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("httplock: Lock: nil next handler")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if g.Skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			if p := g.ReadBody(r); p != nil {
				g.Refuse(w, r, p)
				return
			}
			k, err := key(r)
			if err != nil {
				g.Refuse(w, r, KeyProblem(err))
				return
			}
			h, p := g.Hold(r, g.Key(r.Pattern, k))
			if p != nil {
				g.Refuse(w, r, p)
				return
			}
			returned := false
			defer func() {
				_ = h.Release()
				if p := h.Problem(); p != nil && returned {
					// Headers the handler set belong to an answer that
					// never went out.
					clear(w.Header())
					g.Refuse(w, r, p)
				}
			}()
			next.ServeHTTP(h.Writer(w), r.WithContext(h.Context()))
			returned = true
		})
	}
}
