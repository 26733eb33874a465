package padlock

import (
	"context"
	"errors"
	"time"
)

// Acquire takes the lock on key, waiting up to o.Wait for a holder to let go.
//
// On success the caller owns the returned Lock and must Release it. When the
// key stays held it returns a *NotAcquiredError matching ErrNotAcquired (and
// ctx.Err() when the context ended the wait) that carries the holder's
// remaining lease. When Redis cannot be reached it returns an error matching
// ErrUnavailable: the lock was not taken, and the caller must not proceed as
// if it were. An empty key or invalid Options return an ErrInvalid error.
//
// A waiting Acquire does not poll. It sleeps until a release notice for the
// key arrives, re-checking at the holder's lease end and at least every
// noticeRecheck in case a notice was lost; while notices cannot be received
// it retries on o.Retry's schedule instead. Only the longest-waiting Acquire
// per Locker and key competes when a notice comes, so a release costs one
// attempt per process, not one per waiter; and a release within the same
// Locker hands the lock straight to that waiter, without asking Redis
// (see Lock.Release).
//
// If ctx carries a lock on key from this Locker (see Lock.Context), Acquire
// returns a reentrant handle on it at once, without asking Redis.
func (l *Locker) Acquire(ctx context.Context, key string, o Options) (*Lock, error) {
	if key == "" {
		return nil, invalid("key", "must not be empty")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if lk := l.reentrant(ctx, key); lk != nil {
		return lk, nil
	}
	if l.watchdog.isClosed() {
		return nil, ErrClosed
	}
	o = o.withDefaults(l.defaults)
	if err := l.cfg.checkLease("Options.TTL", o.TTL); err != nil {
		return nil, err
	}
	id := newLockID(l.keys, key, newToken(), o)
	if o.Wait == 0 {
		// One attempt: this acquisition does not outlive the call (a
		// waiting one is shared with the notifier), so it need not be
		// allocated.
		a := acquisition{l: l, key: key, o: o, id: id}
		if lk, err := a.try(ctx); lk != nil || err != nil {
			return lk, err
		}
		return nil, a.failure(ctx)
	}
	now := time.Now()
	a := &acquisition{l: l, key: key, o: o, id: id, began: now, deadline: now.Add(o.Wait)}
	return a.wait(ctx)
}

// noticeRecheck bounds how long a waiter trusts the release notices alone:
// if one was lost, the waiter learns of the release at most this late.
// (Locker.recheck holds it, so tests can prove wake-ups come from notices.)
const noticeRecheck = time.Second

// acquisition is one call of Acquire and what its attempts have seen.
type acquisition struct {
	l        *Locker
	key      string
	o        Options
	id       *lockID
	deadline time.Time // zero: a single attempt
	began    time.Time // when Acquire was called (set when it waits)

	w         *waiter       // this Acquire in its Locker's line, once it joined
	tries     int           // attempts made
	queued    bool          // Fair: Redis confirmed this waiter is queued
	answered  int           // attempts Redis answered (busy)
	holderTTL time.Duration // the holder's remaining lease, as last seen
	seenAt    time.Time     // when holderTTL was seen
	lastErr   error         // the last attempt's error, if Redis failed it
}

// try makes one attempt. It returns the Lock when taken; a non-nil error
// only when the attempt must not be repeated.
func (a *acquisition) try(ctx context.Context) (*Lock, error) {
	a.tries++
	// A fair waiter asks to join the queue until Redis has answered that
	// it did (a busy reply); after a failed or late attempt it asks again.
	a.id.queueFor = 0
	if a.o.Fair && !a.queued && !a.deadline.IsZero() {
		a.id.queueFor = max(time.Until(a.deadline), time.Millisecond)
	}
	reserve, waits := int64(1), !a.deadline.IsZero()
	if waits && !a.o.Fair { // fair locks are never handed on
		reserve = a.l.notifier.reserve(a.id.lockKey(), a.w)
	}
	a.id.setAttempt(reserve, a.l.idArg, waits)
	sent := time.Now()
	g, err := a.l.store.acquire(ctx, a.id)
	answered := time.Now()
	if err == nil && g.first > 0 && !answered.Before(sent.Add(a.o.TTL-a.l.cfg.margin(a.o.TTL))) {
		// The grant came back after its trusted lease had run out: by the
		// time the caller could use it, another owner may hold the key.
		err = errLateGrant
	}
	switch {
	case err == nil && g.first > 0:
		lk := newLock(a.l, a.key, a.id, g.first, a.o, sent, answered)
		lk.fenceEnd = g.last
		if !a.l.watchdog.add(lk.lease) {
			a.l.cleanup(ctx, a.id)
			return nil, ErrClosed
		}
		return lk, nil
	case err == nil:
		a.answered++
		a.queued = a.queued || a.id.queueFor > 0
		a.lastErr, a.holderTTL, a.seenAt = nil, g.holderTTL, time.Now()
	default:
		a.lastErr = err
		if err == errLateGrant {
			a.queued = false // the grant took us off the queue
		}
		if maybeSent(err) {
			// The attempt may have taken the lock before its reply was
			// lost: don't leave it blocking others for a whole lease.
			a.l.cleanup(ctx, a.id)
		}
	}
	return nil, nil
}

// errLateGrant is the attempt error of a grant that arrived too late to use.
var errLateGrant = errors.New("the lock was granted, but the reply came after its lease (less the drift margin) had run out")

// failure is the error of an Acquire that did not get the lock.
func (a *acquisition) failure(ctx context.Context) error {
	if ctx.Err() == nil && a.lastErr != nil {
		return unavailable("acquire", a.lastErr)
	}
	holderTTL := a.holderTTL
	if holderTTL > 0 {
		holderTTL = max(holderTTL-time.Since(a.seenAt), time.Millisecond)
	}
	var cause error
	if ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	return &NotAcquiredError{Key: a.key, RetryAfter: holderTTL, Attempts: a.answered, cause: cause}
}

// wait is Acquire with a wait budget: attempts paced by release notices.
func (a *acquisition) wait(ctx context.Context) (*Lock, error) {
	n := a.l.notifier
	channel := a.id.lockKey()
	waiting, wasLive := n.state(channel)
	// Non-fair newcomers queue behind this Locker's waiters for the key
	// instead of racing them; fair ones always ask Redis, which keeps the
	// order (their first attempt joins the queue there).
	attempted := a.o.Fair || !waiting
	if attempted {
		lk, err := a.try(ctx)
		if lk != nil || err != nil {
			return lk, err
		}
		if ctx.Err() != nil || time.Until(a.deadline) <= 0 {
			return nil, a.failure(ctx)
		}
	}

	w, firstInLine := n.join(ctx, channel, a)
	a.w = w
	acquired, left := false, false
	defer func() {
		if !left {
			n.leave(channel, w, acquired)
		}
		if a.o.Fair && !acquired {
			a.l.leaveQueue(ctx, a.id)
		}
	}()
	// A release that happened between our first attempt and the moment
	// the subscription took effect would go unnoticed: try once more after
	// subscribing, unless notices were flowing before that attempt. A
	// newcomer that queued without trying, and finds itself first (the
	// waiters it saw are gone), tries at once.
	tryNow := (attempted && !wasLive) || (!attempted && firstInLine)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		first := a.o.Fair || n.isFirst(w)
		if tryNow && first {
			if !wasLive {
				select {
				case <-w.kw.ready:
				case <-time.After(min(subscribeTimeout, max(time.Until(a.deadline), 0))):
				case <-ctx.Done():
				}
				wasLive = n.live(w)
			}
			if ctx.Err() == nil {
				lk, err := a.try(ctx)
				if lk != nil || err != nil {
					acquired = lk != nil
					return lk, err
				}
			}
		}
		remaining := time.Until(a.deadline)
		if ctx.Err() != nil || remaining <= 0 {
			return nil, a.failure(ctx)
		}
		d, giveUp := a.sleep(remaining, first, n.live(w))
		if giveUp {
			return nil, a.failure(ctx)
		}
		timer.Reset(d) // since Go 1.23, no stale tick can follow a Reset
		n.park(w)
		select {
		case <-w.wake:
		case <-timer.C:
		case <-ctx.Done():
		}
		if lk := n.unpark(w); lk != nil {
			if ctx.Err() == nil {
				acquired = true
				return lk, nil
			}
			// Handed the lock as the wait was called off: leave the line
			// first, so that the lock can be handed on to the next waiter,
			// then let it go.
			n.leave(channel, w, true)
			left = true
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_ = lk.Release(rctx)
			cancel()
		}
		if ctx.Err() != nil {
			return nil, a.failure(ctx)
		}
		tryNow = true
	}
}

// sleep is how long a waiter sleeps before it looks again, short of a
// notice: never past the wait budget, and for the first in line never past
// the holder's lease end, nor, with notices flowing, past noticeRecheck,
// nor, without them, past the next step of the retry strategy. giveUp is
// true when the strategy says to stop.
func (a *acquisition) sleep(remaining time.Duration, first, live bool) (d time.Duration, giveUp bool) {
	d = remaining
	if !first {
		return min(d, a.l.recheck), false
	}
	if a.holderTTL > 0 {
		d = min(d, max(a.holderTTL-time.Since(a.seenAt), time.Millisecond))
	}
	if live {
		return min(d, a.l.recheck), false
	}
	b := a.o.Retry.NextBackoff(a.tries - 1)
	if b < 0 {
		return 0, true
	}
	return min(d, b), false
}

func (l *Locker) leaveQueue(ctx context.Context, id *lockID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_ = l.store.leaveQueue(ctx, id)
}
