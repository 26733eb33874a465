package httplock

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/padlockgo/padlock"
)

// Limiter is Guard's counterpart for a semaphore: it caps how many
// requests for one key run at once (at most 3 calls at once to a payment
// provider per merchant), where a Guard lets one through. Limit is built
// on it, and so is the Gin middleware.Limit. It is safe for concurrent
// use.
type Limiter struct {
	*Guard
	sem  *padlock.Semaphore
	full int
}

// limitRetryAfter is the Retry-After of a refusal when every permit is
// taken: a permit frees whenever any holder finishes, which the server
// cannot foresee, so the client is told to try again in the shortest time
// the header can say.
const limitRetryAfter = time.Second

// NewLimiter returns a Limiter taking permits from s, refusing requests
// with status full when every permit of their key is taken:
// http.StatusTooManyRequests (429, the client should slow down) or
// http.StatusServiceUnavailable (503, the server is at capacity). opts
// are as for NewGuard (WithBusyStatus does not apply). It panics if s is
// nil, full is another status or an option is invalid.
func NewLimiter(s *padlock.Semaphore, full int, opts ...Option) *Limiter {
	return newLimiter("NewLimiter", s, full, opts)
}

func newLimiter(fn string, s *padlock.Semaphore, full int, opts []Option) *Limiter {
	if s == nil {
		panic("httplock: " + fn + ": nil *padlock.Semaphore")
	}
	if full != http.StatusTooManyRequests && full != http.StatusServiceUnavailable {
		panic(fmt.Sprintf("httplock: %s: full status %d, want 429 (http.StatusTooManyRequests) or 503 (http.StatusServiceUnavailable)", fn, full))
	}
	return &Limiter{Guard: newGuard(fn, s.Locker(), opts), sem: s, full: full}
}

// Acquire takes one of the permits of key, a key from Key, with the lock
// options of WithLockOptions (Wait: how long a request waits for a
// permit), or returns the problem to refuse the request with: the full
// status with "Retry-After: 1" (a permit frees whenever any holder
// finishes, which the server cannot foresee) when every permit stays
// taken, 503 when Redis cannot be reached or ctx ends first, 500
// otherwise. These are Guard.Acquire's answers, built by the same code:
// the key's namespace in the body, and the key itself (in the body and
// in Problem.Err) only with WithEchoKey.
func (lm *Limiter) Acquire(ctx context.Context, key string) (*padlock.Lock, *Problem) {
	return lm.AcquireAs(ctx, key, "")
}

// AcquireAs is Acquire for a permit that names caller as who took it, as
// Guard.AcquireAs.
func (lm *Limiter) AcquireAs(ctx context.Context, key, caller string) (*padlock.Lock, *Problem) {
	if p := probed(ctx, key); p != nil {
		return nil, p
	}
	lk, err := lm.sem.Acquire(ctx, key, lm.lockAs(caller))
	if err == nil {
		return lk, nil
	}
	return nil, lm.refusal(ctx, ctx, key, err, acquirer{
		what:       "permit",
		busy:       lm.full,
		busyDetail: "too many requests for this resource are running at once; retry later",
		retryAfter: func(string, error) time.Duration { return limitRetryAfter },
	})
}

// Limit returns a net/http middleware that runs next while holding one of
// the permits of the key that key builds from the request, so that at
// most s.Permits() requests per key run at once. It is Lock for a
// semaphore: the same namespacing, options and problem responses, except
// that a request finding every permit taken is refused with full (429 or
// 503) and "Retry-After: 1", since a permit frees whenever any holder
// finishes. next sees its permit through
// r.Context() (cancelled if the permit is lost) and padlock.FromContext;
// it is given back when next returns or panics.
//
// Limit panics if s or key is nil, full is not 429 or 503, or an option
// is invalid.
func Limit(s *padlock.Semaphore, key KeyFunc, full int, opts ...Option) func(http.Handler) http.Handler {
	lm := newLimiter("Limit", s, full, opts)
	if key == nil {
		panic("httplock: Limit: nil key func")
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("httplock: Limit: nil next handler")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if lm.Skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			k, err := key(r)
			if err != nil {
				lm.Refuse(w, r, KeyProblem(err))
				return
			}
			lk, p := lm.AcquireAs(r.Context(), lm.Key(r.Pattern, k), lm.Caller(r.Context(), r, r.Pattern))
			if p != nil {
				lm.Refuse(w, r, p)
				return
			}
			defer func() { _ = lm.Release(r, lk) }()
			next.ServeHTTP(w, r.WithContext(lk.Context(r.Context())))
		})
	}
}
