package decorator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
)

// ErrKey reports that the lock key could not be built from the arguments:
// the key func returned an error (wrapped as well) or an empty key. It is
// the caller's bad input; Redis was not asked.
var ErrKey = errors.New("decorator: bad lock key")

// releaseTimeout bounds the Release after the function returns.
const releaseTimeout = 5 * time.Second

// WithLock returns a function that calls fn while holding the lock on the
// key that key builds from fn's argument, taken with o (see the package
// comment for each step). key must return an escaped key, as lockkey's
// functions do; the zero Options mean the Locker's defaults: a 30s lease
// renewed while fn runs, and no waiting, so a busy key fails at once.
//
// opts add hooks (WithReleaseError, WithAcquireError) and name the
// function (WithName): each lock names it as its holder's Caller,
// "func=orders.Service.Pay", after the Locker's Owner.
//
// The returned function is safe for concurrent use. WithLock panics if l,
// key or fn is nil or o or an option is invalid: they are static
// configuration.
func WithLock[A, T any](l *padlock.Locker, key func(A) (string, error), o padlock.Options,
	fn func(context.Context, A) (T, error), opts ...Option) func(context.Context, A) (T, error) {
	cfg := mustConfig("WithLock", l, key == nil, fn == nil, o, opts)
	o = named(o, cfg, fn)
	return func(ctx context.Context, a A) (T, error) {
		k, err := key(a)
		if err != nil {
			var zero T
			err = fmt.Errorf("%w: %w", ErrKey, err)
			cfg.acquireFailed(ctx, "", err)
			return zero, err
		}
		return run(ctx, l, k, o, cfg, fn, a)
	}
}

// WithLockErr is WithLock for a function that returns only an error.
func WithLockErr[A any](l *padlock.Locker, key func(A) (string, error), o padlock.Options,
	fn func(context.Context, A) error, opts ...Option) func(context.Context, A) error {
	cfg := mustConfig("WithLockErr", l, key == nil, fn == nil, o, opts)
	o = named(o, cfg, fn)
	return func(ctx context.Context, a A) error {
		k, err := key(a)
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrKey, err)
			cfg.acquireFailed(ctx, "", err)
			return err
		}
		_, err = run(ctx, l, k, o, cfg, callErr[A], errCall[A]{fn, a})
		return err
	}
}

// Do calls fn once, now, while holding the lock on key, taken with o, and
// returns fn's error or why fn did not run (see the package comment). key
// is used as given: build it from raw values with lockkey.Join. To get a
// result out, assign it from inside fn.
//
// Do does not panic on bad arguments: a nil l or fn, or an invalid option,
// is an error matching padlock.ErrInvalid, and an empty key one matching
// ErrKey.
func Do(ctx context.Context, l *padlock.Locker, key string, o padlock.Options, fn func(context.Context) error, opts ...Option) error {
	if l == nil || fn == nil {
		return fmt.Errorf("%w: decorator: Do: nil Locker or fn", padlock.ErrInvalid)
	}
	return do(ctx, "Do", l, key, o, fn, opts)
}

// do is Do and DoPermit once their arguments are checked: name is the
// caller's, for errors.
func do(ctx context.Context, name string, l acquirer, key string, o padlock.Options, fn func(context.Context) error, opts []Option) error {
	cfg, err := newConfig(name, opts)
	if err != nil {
		return fmt.Errorf("%w: %w", padlock.ErrInvalid, err)
	}
	_, err = run(ctx, l, key, named(o, cfg, fn), cfg, callDo, fn)
	return err
}

// errCall and callErr adapt a func(ctx, A) error to run without a closure,
// which would cost an allocation per call.
type errCall[A any] struct {
	fn func(context.Context, A) error
	a  A
}

func callErr[A any](ctx context.Context, c errCall[A]) (struct{}, error) {
	return struct{}{}, c.fn(ctx, c.a)
}

func callDo(ctx context.Context, fn func(context.Context) error) (struct{}, error) {
	return struct{}{}, fn(ctx)
}

// acquirer takes what run holds: a Locker's lock, or a Semaphore's permit
// (permit.go).
type acquirer interface {
	Acquire(ctx context.Context, key string, o padlock.Options) (*padlock.Lock, error)
}

// run takes the lock on key, calls fn(ctx, a) under it, and releases it.
func run[A, T any](ctx context.Context, l acquirer, key string, o padlock.Options, cfg *config,
	fn func(context.Context, A) (T, error), a A) (v T, err error) {
	if key == "" {
		err = fmt.Errorf("%w: the key is empty", ErrKey)
		cfg.acquireFailed(ctx, "", err)
		return v, err
	}
	key = lockkey.Shorten(key)
	lk, err := l.Acquire(ctx, key, o)
	if err != nil {
		cfg.acquireFailed(ctx, key, err)
		return v, err
	}
	// fn's context must end when fn returns. Releasing the lock cancels it,
	// except when lk is a reentrant handle on a lock ctx already carries:
	// then cancel it here, so that it does not stay registered with an
	// outer lock that may be held for long. Only then is the extra context
	// worth its allocations.
	fnCtx, cancel := ctx, context.CancelFunc(nil)
	if padlock.FromContext(ctx) != nil {
		fnCtx, cancel = context.WithCancel(ctx)
	}
	returned := false
	defer func() {
		if cancel != nil {
			cancel()
		}
		if !returned { // fn panicked: release, and let the panic go on
			cfg.releaseFailed(ctx, key, release(ctx, lk))
		}
	}()
	v, err = fn(lk.Context(fnCtx), a)
	returned = true
	lost := errors.Is(lk.Err(), padlock.ErrLockLost)
	rerr := release(ctx, lk)
	if errors.Is(rerr, padlock.ErrNotHeld) {
		lost = true // gone before renewal noticed: the key expired or was taken
	}
	cfg.releaseFailed(ctx, key, rerr)
	if lost {
		err = lostError(key, err)
	}
	return v, err
}

func release(ctx context.Context, lk *padlock.Lock) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return lk.Release(ctx)
}

// lostError is the error of a call whose lock was lost while fn ran, fn
// having returned err.
func lostError(key string, err error) error {
	switch {
	case err == nil:
		return fmt.Errorf("decorator: lock %q was lost while the function ran: %w", key, padlock.ErrLockLost)
	case errors.Is(err, padlock.ErrLockLost):
		return err // a nested call said so already
	}
	return fmt.Errorf("%w (decorator: lock %q was lost while the function ran: %w)", err, key, padlock.ErrLockLost)
}

func mustConfig(name string, l *padlock.Locker, nilKey, nilFn bool, o padlock.Options, opts []Option) *config {
	switch {
	case l == nil:
		panic("decorator: " + name + ": nil *padlock.Locker")
	case nilKey:
		panic("decorator: " + name + ": nil key func")
	case nilFn:
		panic("decorator: " + name + ": nil fn")
	}
	if err := o.Validate(); err != nil {
		panic("decorator: " + name + ": " + err.Error())
	}
	cfg, err := newConfig(name, opts)
	if err != nil {
		panic(err.Error())
	}
	return cfg
}
