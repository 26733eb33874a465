// Package refusal carries one fact back through a handler chain: a lock
// or limiter behind a middleware refused the request before its handler
// ran (busy, every permit taken, Redis unreachable). The idempotency
// middleware watches for it, so that such an answer frees the
// Idempotency-Key for a retry instead of becoming the key's answer, and
// nothing else does: a handler's own answer, Retry-After or not, is the
// handler's. The faces that take locks (httplock's Guard and Limiter, and
// through them the Gin middleware) report it, in httplock.Guard.Refuse.
package refusal

import (
	"context"
	"sync/atomic"
)

// Watch is one request's watch, safe for concurrent use.
type Watch struct{ refused atomic.Bool }

type ctxKey struct{}

// With returns ctx carrying a fresh Watch, and the Watch.
func With(ctx context.Context) (context.Context, *Watch) {
	w := &Watch{}
	return context.WithValue(ctx, ctxKey{}, w), w
}

// From returns the Watch ctx carries, or nil.
func From(ctx context.Context) *Watch {
	w, _ := ctx.Value(ctxKey{}).(*Watch)
	return w
}

// Mark records that a lock or limiter refused the request.
func (w *Watch) Mark() { w.refused.Store(true) }

// Refused reports whether Mark was called.
func (w *Watch) Refused() bool { return w.refused.Load() }
