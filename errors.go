package padlock

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrNotAcquired reports that the key stayed held by another owner for the
	// whole wait. The concrete error is a *NotAcquiredError; RetryAfter reads
	// the holder's remaining lease from it. When the wait ended because the
	// context did, the error matches ctx.Err() as well.
	ErrNotAcquired = errors.New("padlock: not acquired")

	// ErrNotHeld reports that a lock is no longer held by its owner: its lease
	// ran out, or the key now belongs to someone else. Nothing was changed.
	// When the lock was lost rather than released by its owner (Err would
	// say ErrLockLost), the error Release, Extend, TTL or Detach returns
	// matches ErrLockLost as well, so callers can check for either.
	ErrNotHeld = errors.New("padlock: lock not held")

	// ErrUnavailable reports that Redis could not be reached or refused the
	// command. The lock was not taken; the underlying go-redis error is wrapped
	// as well.
	ErrUnavailable = errors.New("padlock: redis unavailable")

	// ErrInvalid reports a bad argument: an empty key, a bad Options field or
	// a bad Locker option. The message names the field.
	ErrInvalid = errors.New("padlock: invalid argument")

	// ErrClosed reports an Acquire on a Locker that was closed.
	ErrClosed = errors.New("padlock: locker closed")

	// ErrReleased is the cause a lock's context carries after the lock was
	// released by its owner.
	ErrReleased = errors.New("padlock: lock released")

	// ErrLockLost is the cause a lock's context carries after the lock was
	// lost: renewal found the owner token gone, or Redis stayed unreachable
	// until the lease might have run out. The ErrNotHeld error of a lost
	// lock matches it too.
	ErrLockLost = errors.New("padlock: lock lost")
)

// errLost is the ErrNotHeld a lock's methods return once the lock was
// lost: it matches ErrLockLost as well.
var errLost error = lostError{}

type lostError struct{}

// Error says what ErrNotHeld says: the lock is not held. Err tells why.
func (lostError) Error() string { return ErrNotHeld.Error() }

// Is makes errors.Is true for ErrNotHeld and ErrLockLost.
func (lostError) Is(target error) bool { return target == ErrNotHeld || target == ErrLockLost }

// notHeld returns the ErrNotHeld error for a lock whose Err is end: one
// that matches ErrLockLost too when the lock was lost.
func notHeld(end error) error {
	if end == ErrLockLost {
		return errLost
	}
	return ErrNotHeld
}

// NotAcquiredError is the error Acquire returns when the key stayed busy.
// It matches ErrNotAcquired with errors.Is, and also the context error when
// the wait was cut short by the context.
type NotAcquiredError struct {
	// Key is the lock key as passed to Acquire.
	Key string
	// RetryAfter is the holder's remaining lease as last seen, or 0 when it
	// is not known (no attempt reached Redis, or the holder set no lease).
	RetryAfter time.Duration
	// Attempts is how many acquisition attempts reached Redis.
	Attempts int
	// Holder is the holder's Options.Owner and Options.Caller as last
	// seen, when it set one ("" otherwise): "host=web-1 pid=4121
	// route=POST /orders/<id>/pay caller=#3fa9c1e2d4b5". On a Redlock
	// Locker it is the owner most of the busy nodes name; for a semaphore,
	// the holder of the permit whose lease ends first.
	Holder string

	cause error // ctx.Err() or the last Redis error, if any
}

// Error says which key stayed held, the holder's remaining lease when
// known, and the cause that ended the wait, if any.
func (e *NotAcquiredError) Error() string {
	msg := fmt.Sprintf("padlock: not acquired: key %q is held", e.Key)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (holder's lease ends in %v)", e.RetryAfter.Round(time.Millisecond))
	}
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrNotAcquired) true.
func (e *NotAcquiredError) Is(target error) bool { return target == ErrNotAcquired }

// Unwrap returns the context error that ended the wait, if any.
func (e *NotAcquiredError) Unwrap() error { return e.cause }

// RetryAfter reports the holder's remaining lease carried by an error from
// Acquire, for a Retry-After header. ok is false when err is not an
// ErrNotAcquired error or the lease is unknown.
func RetryAfter(err error) (d time.Duration, ok bool) {
	var na *NotAcquiredError
	if errors.As(err, &na) && na.RetryAfter > 0 {
		return na.RetryAfter, true
	}
	return 0, false
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
