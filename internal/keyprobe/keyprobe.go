// Package keyprobe carries a question through a handler chain: which lock
// key would the first lock middleware on the request's way take? The
// faces that take locks (httplock's Guard and Limiter, and through them
// the Gin middleware) answer it instead of taking the lock, and those that
// stand before a lock without being one (idempotency) let it through.
package keyprobe

import (
	"context"
	"sync"
)

// Probe is one question, answered at most once.
type Probe struct {
	mu   sync.Mutex
	done bool
	key  string
	err  error
}

type ctxKey struct{}

// With returns ctx carrying a fresh Probe, and the Probe.
func With(ctx context.Context) (context.Context, *Probe) {
	p := &Probe{}
	return context.WithValue(ctx, ctxKey{}, p), p
}

// From returns the Probe ctx carries, or nil.
func From(ctx context.Context) *Probe {
	p, _ := ctx.Value(ctxKey{}).(*Probe)
	return p
}

// Answer records key, or err, unless the Probe was answered already.
func (p *Probe) Answer(key string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		p.done, p.key, p.err = true, key, err
	}
}

// Done reports whether the Probe was answered.
func (p *Probe) Done() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Result returns the answer, and whether there is one.
func (p *Probe) Result() (key string, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.key, p.done, p.err
}
