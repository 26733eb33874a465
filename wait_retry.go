package padlock

import (
	"math/rand/v2"
	"time"
)

// RetryStrategy paces the attempts of a waiting Acquire. Implementations must
// be safe for concurrent use: one strategy serves every Acquire that uses it,
// so it keeps no state between calls; the attempt number says where an
// Acquire is.
//
// Acquire asks it after every failed attempt. While release notices arrive,
// they pace the attempts and only a negative backoff counts; without them
// (pub/sub unavailable or refused), the backoff is the time to the next
// attempt.
type RetryStrategy interface {
	// NextBackoff returns how long to sleep after the given failed attempt
	// (0 for the first). A negative value stops waiting at once.
	NextBackoff(attempt int) time.Duration
}

var defaultRetry = ExponentialBackoff(2*time.Millisecond, 256*time.Millisecond)

// ExponentialBackoff sleeps min·2^attempt, capped at max, with "equal jitter":
// a random duration in [d/2, d), so waiters that failed together do not retry
// together. min and max below 1ms are raised to 1ms.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	min = atLeast(min, time.Millisecond)
	return exponential{min: min, max: atLeast(max, min)}
}

type exponential struct{ min, max time.Duration }

func (e exponential) NextBackoff(attempt int) time.Duration {
	d := e.max
	if attempt < 32 {
		if x := e.min << attempt; x > 0 && x < e.max {
			d = x
		}
	}
	return jitter(d)
}

// LinearBackoff sleeps d (at least 1ms) with equal jitter after every attempt.
func LinearBackoff(d time.Duration) RetryStrategy { return linear(atLeast(d, time.Millisecond)) }

type linear time.Duration

func (l linear) NextBackoff(int) time.Duration { return jitter(time.Duration(l)) }

// NoRetry makes Acquire give up after the first attempt, whatever Wait says.
func NoRetry() RetryStrategy { return noRetry{} }

type noRetry struct{}

func (noRetry) NextBackoff(int) time.Duration { return -1 }

// LimitAttempts stops s after the given number of attempts in all, the
// first included; until then s paces them. It composes with any strategy:
// LimitAttempts(ExponentialBackoff(min, max), 5) makes at most 5 attempts,
// fewer if s or the wait stops first. attempts below 1 count as 1, which
// is NoRetry; a nil s is the default backoff. (bsm/redislock's
// LimitRetry(s, n) counts retries after the first attempt: it is
// LimitAttempts(s, n+1).)
func LimitAttempts(s RetryStrategy, attempts int) RetryStrategy {
	if s == nil {
		s = defaultRetry
	}
	return limited{s: s, attempts: max(attempts, 1)}
}

type limited struct {
	s        RetryStrategy
	attempts int
}

func (l limited) NextBackoff(attempt int) time.Duration {
	if attempt+1 >= l.attempts {
		return -1
	}
	return l.s.NextBackoff(attempt)
}

func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half)
}

func atLeast(d, floor time.Duration) time.Duration {
	if d < floor {
		return floor
	}
	return d
}
