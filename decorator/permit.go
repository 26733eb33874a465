package decorator

import (
	"context"
	"fmt"

	"github.com/padlockgo/padlock"
)

// WithPermit returns a function that calls fn while holding one of the
// permits of s for the key that key builds from fn's argument, taken with
// o: at most s.Permits() calls per key run at once, across every process
// sharing the Redis deployment (at most 3 calls at once to a payment
// provider per merchant). It is WithLock for a semaphore, step for step:
// a call that finds every permit taken (after waiting up to o.Wait) does
// not run fn and returns an error matching padlock.ErrNotAcquired; fn's
// context ends if the permit is lost, and the call's error then matches
// padlock.ErrLockLost. A call made under a permit of the same key (fn
// calling a function decorated with the same semaphore) runs under that
// permit, without waiting for a second.
//
// opts are WithLock's (WithAcquireError, WithReleaseError, WithName).
//
// The returned function is safe for concurrent use. WithPermit panics if
// s, key or fn is nil or o is invalid: they are static configuration.
func WithPermit[A, T any](s *padlock.Semaphore, key func(A) (string, error), o padlock.Options,
	fn func(context.Context, A) (T, error), opts ...Option) func(context.Context, A) (T, error) {
	if s == nil {
		panic("decorator: WithPermit: nil *padlock.Semaphore")
	}
	cfg := mustConfig("WithPermit", s.Locker(), key == nil, fn == nil, o, opts)
	o = named(o, cfg, fn)
	return func(ctx context.Context, a A) (T, error) {
		k, err := key(a)
		if err != nil {
			var zero T
			err = fmt.Errorf("%w: %w", ErrKey, err)
			cfg.acquireFailed(ctx, "", err)
			return zero, err
		}
		return run(ctx, s, k, o, cfg, fn, a)
	}
}

// DoPermit calls fn once, now, while holding one of the permits of s for
// key, taken with o, and returns fn's error or why fn did not run, as Do
// does for a lock. A nil s or fn is an error matching padlock.ErrInvalid,
// and an empty key one matching ErrKey.
func DoPermit(ctx context.Context, s *padlock.Semaphore, key string, o padlock.Options, fn func(context.Context) error, opts ...Option) error {
	if s == nil || fn == nil {
		return fmt.Errorf("%w: decorator: DoPermit: nil Semaphore or fn", padlock.ErrInvalid)
	}
	return do(ctx, "DoPermit", s, key, o, fn, opts)
}
