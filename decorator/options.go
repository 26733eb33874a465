package decorator

import (
	"context"
	"fmt"
)

// An Option configures WithLock, WithLockErr and Do with hooks that see
// what a call's result does not show, for logs and metrics kept in one
// place rather than at every call site. The names match the middlewares'
// (httplock.WithReleaseError).
type Option func(*config)

type config struct {
	releaseError func(ctx context.Context, key string, err error) // nil: none
	acquireError func(ctx context.Context, key string, err error) // nil: none
	invalid      string                                           // what an option found wrong in its own argument
}

// WithReleaseError sets a function that is told when the Release after the
// function fails: padlock.ErrNotHeld when the lock was no longer held in
// Redis (it expired or was taken away while the function ran; the call
// then also returns an error matching padlock.ErrLockLost), or a
// padlock.ErrUnavailable error when Redis did not answer (the lock then
// ends with its lease, and the call's result does not show it). ctx is the
// caller's and key the lock key. fn runs on the caller's goroutine after
// the function returned (also when it panicked), so concurrently for
// concurrent calls: it must be safe for concurrent use, and should not
// panic. A nil fn is invalid. Default: none.
func WithReleaseError(fn func(ctx context.Context, key string, err error)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid = "WithReleaseError: nil func"
		}
		c.releaseError = fn
	}
}

// WithAcquireError sets a function that is told when the function did not
// run because the lock was not taken: the key could not be built (ErrKey;
// key is then ""), the key stayed busy (padlock.ErrNotAcquired), Redis
// could not be reached (padlock.ErrUnavailable), or ctx ended. err is the
// error the call returns. fn runs on the caller's goroutine before the call
// returns; it must be safe for concurrent use, and should not panic. A nil
// fn is invalid. Default: none.
func WithAcquireError(fn func(ctx context.Context, key string, err error)) Option {
	return func(c *config) {
		if fn == nil {
			c.invalid = "WithAcquireError: nil func"
		}
		c.acquireError = fn
	}
}

// newConfig applies opts, returning nil when there are none (calls then pay
// nothing for hooks), or what is wrong with them.
func newConfig(name string, opts []Option) (*config, error) {
	if len(opts) == 0 {
		return nil, nil
	}
	c := &config{}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("decorator: %s: option %d is nil", name, i+1)
		}
		o(c)
		if c.invalid != "" {
			return nil, fmt.Errorf("decorator: %s: %s", name, c.invalid)
		}
	}
	return c, nil
}

func (c *config) acquireFailed(ctx context.Context, key string, err error) {
	if c != nil && c.acquireError != nil {
		c.acquireError(ctx, key, err)
	}
}

func (c *config) releaseFailed(ctx context.Context, key string, err error) {
	if c != nil && c.releaseError != nil && err != nil {
		c.releaseError(ctx, key, err)
	}
}
