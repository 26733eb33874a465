package padlock

import (
	"context"
	"time"
)

// pacing is what the attempts of one acquisition (Acquire, a hold's
// Acquire, AcquireAll) have seen, and when the next one may go: what
// decides whether it tries again, and the error it ends with when it
// does not.
type pacing struct {
	deadline  time.Time     // zero: a single attempt
	tries     int           // attempts made
	answered  int           // attempts Redis answered (busy)
	holderTTL time.Duration // the holder's remaining lease, as last seen
	seenAt    time.Time     // when holderTTL was seen
	holder    string        // the holder's Options.Owner and Caller, as last seen
	lastErr   error         // the last attempt's error, if Redis failed it
	failed    int           // attempts in a row that Redis failed
	failedAt  time.Time     // when the first of them was sent
	retryAt   time.Time     // when the retry strategy lets the next attempt go, short of a notice
	// rebidAt is when the first in line places the Locker's bid again
	// (bidRefresh after the sleep that followed its last attempt began):
	// a wake-up that only moves when to look again (a grant elsewhere)
	// must not move it later. Zero until that first sleep.
	rebidAt time.Time
}

// mayRetry decides, after an attempt that did not get the lock, whether
// the acquisition may try again: false when it must end (its wait or ctx
// ended, Redis stayed unreachable, or retry gave up), true having set when
// retry lets the next attempt go.
func (p *pacing) mayRetry(ctx context.Context, retry RetryStrategy) bool {
	switch {
	case p.deadline.IsZero() || ctx.Err() != nil || !time.Now().Before(p.deadline):
		return false
	case p.failed >= unreachableAttempts || p.failed > 0 && time.Since(p.failedAt) >= unreachableAfter:
		return false
	}
	b := retry.NextBackoff(p.tries - 1)
	if b < 0 {
		return false
	}
	p.retryAt = time.Now().Add(b)
	return true
}

// notAcquired is the error of an acquisition of key that ended without
// the lock: ErrUnavailable when Redis failed its last attempt, a
// *NotAcquiredError otherwise.
func (p *pacing) notAcquired(ctx context.Context, key string) error {
	if ctx.Err() == nil && p.lastErr != nil {
		return unavailable("acquire", p.lastErr)
	}
	holderTTL := p.holderTTL
	if holderTTL > 0 {
		holderTTL = max(holderTTL-time.Since(p.seenAt), time.Millisecond)
	}
	var cause error
	if ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	return &NotAcquiredError{Key: key, RetryAfter: holderTTL, Attempts: p.answered, Holder: p.holder, cause: cause}
}
