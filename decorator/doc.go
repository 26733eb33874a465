// Package decorator runs functions while holding a padlock lock: the Go
// shape of a Java @RedisLock aspect on a method.
//
// WithLock wraps a function of one argument; the lock key is built from
// that argument, usually with lockkey.Arg or lockkey.Args, which escape the
// raw values so that one resource's key never equals another's:
//
//	pay := decorator.WithLock(locker,
//		lockkey.Arg("order", func(r PayRequest) string { return r.OrderID }),
//		padlock.Options{Wait: 2 * time.Second},
//		payOrder) // func(ctx context.Context, r PayRequest) (Receipt, error)
//
//	receipt, err := pay(ctx, req)
//
// WithLockErr is the same for functions that return only an error, and Do
// runs a closure once, now, under the lock on a key.
//
// Trailing options add hooks, named as the middlewares' are:
// WithReleaseError is told of a release that failed, WithAcquireError of a
// call that did not run for want of the lock.
//
// Each lock names the function that took it (padlock.Options.Caller),
// after the Locker's Owner: "func=orders.Service.Pay", the wrapped
// function's name without its import path, or WithName's. The lock page
// (lockview), Locker.Inspect and a call refused meanwhile
// (padlock.NotAcquiredError.Holder) read it.
//
// Every call of a wrapped function, and every Do:
//
//  1. Builds the key. A key func error, or an empty key, is returned
//     wrapped in ErrKey (the caller's input is bad) without asking Redis.
//     Keys longer than lockkey.MaxKeyLen are hashed with lockkey.Shorten.
//  2. Takes the lock with padlock.Locker.Acquire, waiting up to Options.Wait
//     for a busy key. If the key stays busy the error matches
//     padlock.ErrNotAcquired (padlock.RetryAfter reads the holder's
//     remaining lease); if Redis cannot be reached it matches
//     padlock.ErrUnavailable. Either way the function does not run.
//  3. Runs the function with a context that carries the lock (see
//     padlock.Lock.Context): it is cancelled when the lock is lost
//     (context.Cause then returns padlock.ErrLockLost) and when the function
//     returns; padlock.FromContext(ctx).Fence() reads the fence. A wrapped
//     function that calls another one, or itself, with that context on the
//     same key gets the lock at once (reentrancy) instead of deadlocking.
//  4. Releases the lock when the function returns or panics (the panic then
//     goes on), on a context detached from the caller's and bounded by 5s,
//     so a cancelled caller still releases. If Redis cannot be reached for
//     the release, the lock ends with its lease; only WithReleaseError's
//     func is told.
//  5. If the lock was lost while the function ran, returns the function's
//     result together with an error matching padlock.ErrLockLost (and the
//     function's own error, if it returned one). The function's work may
//     then have overlapped with another holder's: on a payment path the
//     caller must not report success just because the function did. A store
//     that checks the fence will have rejected the stale writes.
//
// WithPermit and DoPermit do the same under one of the permits of a
// padlock.Semaphore instead of a lock: at most N calls per key at once.
package decorator
