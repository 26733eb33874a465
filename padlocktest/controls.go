package padlocktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/padlockgo/padlock"
)

// Busy makes key busy: another Locker on the same Redis (a second process,
// as far as the Env's Locker can tell) takes it, so the Env's Locker gets
// padlock.ErrNotAcquired for it, with a RetryAfter of at most lease, until
// the lease ends or the returned Lock is released. A lease of 0 holds the
// key, renewed, until then. Acquires that wait for key get it as they would
// from any other process: when the lease ends, or at once on the notice the
// release sends.
//
// The holder uses the options given with WithLockerOptions, so it agrees
// with the Env's Locker on the key prefix and on Options.Fair. Busy returns
// an ErrControl error, at once, when key is held or (under Options.Fair) a
// waiter is first in line for it, and padlock's own errors (ErrInvalid,
// ErrUnavailable) as Acquire does. A grant whose reply came back after a
// short lease had run out (a starved test runtime: the race detector, a
// loaded CI machine) is asked for again, up to 5 times, before Busy says
// ErrUnavailable.
func (e *Env) Busy(ctx context.Context, key string, lease time.Duration) (*padlock.Lock, error) {
	if lease < 0 {
		return nil, fmt.Errorf("%w: Busy: lease must not be negative, got %v", padlock.ErrInvalid, lease)
	}
	other, err := e.otherLocker()
	if err != nil {
		return nil, err
	}
	// A held key is refused without an attempt: under Options.Fair, a
	// failed attempt that may wait joins the key's queue, and would be
	// first in line when the holder lets go.
	if e.m.Exists(e.locker.RedisKey(key)) {
		return nil, fmt.Errorf("%w: Busy(%q): the key is held", ErrControl, key)
	}
	// One attempt, whatever Wait the Locker's defaults set: the caller
	// asked for the key to be busy now. A zero Wait would take the
	// defaults' Wait, and NoRetry does not end a wait that release notices
	// pace, so the budget is the shortest there is.
	o := padlock.Options{TTL: lease, NoRenew: lease > 0, Wait: time.Nanosecond}
	lk, err := other.Acquire(ctx, key, o)
	// With Redis up, ErrUnavailable is a grant whose reply came after its
	// lease had run out, which the Locker has already let go: a short
	// lease on a starved test runtime (the race detector, a loaded CI
	// machine). Take the key again, a few times, rather than fail a test
	// that only asked for a busy key.
	for try := 1; try < busyTries && errors.Is(err, padlock.ErrUnavailable) && !e.isDown() && ctx.Err() == nil; try++ {
		lk, err = other.Acquire(ctx, key, o)
	}
	if errors.Is(err, padlock.ErrNotAcquired) {
		return nil, fmt.Errorf("%w: Busy(%q): the key is not free: %w", ErrControl, key, err)
	}
	return lk, err
}

// busyTries is how many times Busy asks for a key whose grant keeps
// coming back after its lease.
const busyTries = 5

// isDown reports whether Down took Redis away.
func (e *Env) isDown() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.down
}

// otherLocker returns the Locker Busy takes keys with, made on first use.
func (e *Env) otherLocker() (*padlock.Locker, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, padlock.ErrClosed
	}
	if e.other == nil {
		// The client and options were checked when the Env's Locker was
		// built: New does not refuse them now.
		other, err := padlock.New(e.client, e.opts...)
		if err != nil {
			return nil, err
		}
		e.other = other
	}
	return e.other, nil
}

// Lose deletes the lock on key from Redis, whoever holds it, as a Redis
// that restarts without persistence or fails over to a replica that missed
// the write would, and reports whether there was one. The key is free at
// once. The holder hears of it at its next contact with Redis: its next
// renewal, a third into its lease (10s with padlock's default 30s lease; a
// default lease of a second, set with WithLockerOptions, makes it a third
// of a second), or its next TTL, Extend or Release. Then its Done closes and the contexts
// made from it are cancelled with padlock.ErrLockLost.
//
// Lose is for locks the test holds no handle to, such as one a middleware
// took for the request in flight. A test holding the Lock uses LoseLock,
// which needs no waiting.
func (e *Env) Lose(key string) bool {
	return e.m.Del(e.locker.RedisKey(key))
}

// LoseLock deletes lk's lock from Redis, as Lose does, and makes lk learn
// of it at once: when LoseLock returns nil, lk.Done is closed and lk.Err
// is padlock.ErrLockLost. A lock that was lost already stays lost, and
// whoever holds its key since keeps it; one that was released is left
// alone, and LoseLock returns an ErrControl error. A handler holding a
// lock it got from a middleware reaches it with padlock.FromContext.
//
// While Redis is down the key is deleted but lk cannot be told: LoseLock
// returns the padlock.ErrUnavailable error, and lk is lost, as any lock
// whose renewals go unanswered, when its lease may have run out.
func (e *Env) LoseLock(ctx context.Context, lk *padlock.Lock) error {
	if lk == nil {
		return fmt.Errorf("%w: LoseLock: nil lock", padlock.ErrInvalid)
	}
	if err := lk.Err(); err != nil && !errors.Is(err, padlock.ErrLockLost) {
		return fmt.Errorf("%w: LoseLock: the lock on %q has ended: %w", ErrControl, lk.Key(), err)
	}
	key := e.locker.RedisKey(lk.Key())
	// Delete only our own lock: once lost, the key may be someone else's.
	// The stored value is the token, "|", the number of the last lease
	// change, and maybe a "*" (see padlock.Lock.Token).
	if v, err := e.m.Get(key); err == nil && strings.HasPrefix(v, lk.Token()+"|") {
		e.m.Del(key)
	}
	// TTL finds the token gone and ends the lock as lost.
	switch _, err := lk.TTL(ctx); {
	case errors.Is(err, padlock.ErrNotHeld):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%w: LoseLock: %q is still held after its key was deleted", ErrControl, lk.Key())
}

// Down takes Redis away: the server stops and its connections close, so
// every command fails at once and Acquire returns padlock.ErrUnavailable
// (the HTTP 503 path). Held locks go unrenewed, and each is lost
// (padlock.ErrLockLost) when its lease may have run out, unless Up comes
// first. Keys keep their data and their leases keep running meanwhile.
// Down on a Redis that is down does nothing.
//
// The Env's client dials no Redis while it is down, so go-redis logs no
// failed dial meanwhile (clients of the test's own, on Addr, still do,
// through go-redis's one global logger: redis.SetLogger in TestMain
// quiets them).
func (e *Env) Down() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.down || e.closed {
		return
	}
	e.down = true
	e.m.Close()
}

// Up brings Redis back after Down, on the same address and with the same
// data, as after a network partition heals. For a Redis that comes back
// empty, as one without persistence restarts, call Miniredis().FlushAll()
// before Up. Up on a Redis that is up does nothing. It returns an
// ErrControl error when the address cannot be bound again.
func (e *Env) Up() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.down || e.closed {
		return nil
	}
	if err := e.m.Restart(); err != nil {
		return fmt.Errorf("%w: Up: restarting miniredis on %s: %w", ErrControl, e.m.Addr(), err)
	}
	e.down = false
	return nil
}

// Advance moves Redis's clock on by d: every lease in Redis is d shorter,
// and those that end are gone, so a key made busy frees itself without
// the wait. It is how a test with WithManualClock lets time pass; with the
// real-time clock it jumps ahead of real time. The Locker's own timing
// (renewals, the lost signal) follows the process's clock, not this one.
func (e *Env) Advance(d time.Duration) {
	if d > 0 {
		e.m.FastForward(d)
	}
}
