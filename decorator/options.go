package decorator

import (
	"context"
	"fmt"
)

// An Option configures WithLock, WithLockErr and Do with hooks that see
// what a call's result does not show, for logs and metrics kept in one
// place rather than at every call site, and with the name its locks give
// the function. The names match the middlewares'
// (httplock.WithReleaseError).
type Option func(*config)

type config struct {
	releaseError func(ctx context.Context, key string, err error) // nil: none
	acquireError func(ctx context.Context, key string, err error) // nil: none
	name         string                                           // "": the function's own
	invalid      string                                           // what an option found wrong in its own argument
}

// WithName names the function in the owner of the locks it takes
// (padlock.Options.Caller, "func=<name>", after the Locker's Owner), for
// the lock page, Locker.Inspect and a call refused meanwhile
// (padlock.NotAcquiredError.Holder): "billing.Settle" says more than a
// closure's name does. Bytes an owner may not hold are percent-escaped,
// and a name longer than padlock.MaxOwnerLen is cut in its middle. It
// names code, and is shown as it is: no request data in it. An empty
// name is invalid. Default: the wrapped function's own name, without
// its import path, "orders.Service.Pay" for a method value of
// *orders.Service, "main.run" for a closure written in run. Options.Caller,
// when set, wins.
func WithName(name string) Option {
	return func(c *config) {
		if name == "" {
			c.invalid = "WithName: empty name"
		}
		c.name = name
	}
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
