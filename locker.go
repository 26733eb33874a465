package padlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker takes and holds locks on one Redis deployment, or on a quorum of
// independent nodes (NewRedlock). It is safe for concurrent use; build one
// per deployment and share it. Close it when done.
type Locker struct {
	store    store
	keys     keyspace
	defaults Options
	cfg      config
	watchdog *watchdog
}

// New returns a Locker on client: a *redis.Client, a Sentinel failover client
// or a *redis.ClusterClient. The Locker does not own client: close client
// after closing the Locker.
//
// New panics when client is nil or an option is invalid, with a message
// naming the problem: both are static configuration, and failing at start-up
// beats failing on the first request.
func New(client redis.UniversalClient, opts ...Option) *Locker {
	if client == nil {
		panic(invalid("New", "redis client is nil"))
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	return newLocker(single{client: client}, cfg)
}

func newLocker(s store, cfg config) *Locker {
	return &Locker{
		store:    s,
		keys:     keyspace{prefix: cfg.prefix},
		defaults: cfg.defaults,
		cfg:      cfg,
		watchdog: newWatchdog(s, cfg.margin),
	}
}

// Close stops the Locker's background work and waits for it to end. It does
// not release held locks: they stop being renewed and expire with their
// lease, and since nobody watches them any more their Done channels close
// (ErrLockLost). Acquire fails with ErrClosed afterwards. Close is safe to
// call more than once.
func (l *Locker) Close() error {
	l.watchdog.close()
	return nil
}

// Acquire takes the lock on key, waiting up to o.Wait for a holder to let go.
//
// On success the caller owns the returned Lock and must Release it. When the
// key stays held it returns a *NotAcquiredError matching ErrNotAcquired (and
// ctx.Err() when the context ended the wait) that carries the holder's
// remaining lease. When Redis cannot be reached it returns an error matching
// ErrUnavailable: the lock was not taken, and the caller must not proceed as
// if it were. An empty key or invalid Options return an ErrInvalid error.
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
	o = o.withDefaults(l.defaults)

	id := newLockID(l.keys, key, newToken(), o.TTL)
	var (
		deadline  time.Time // zero: a single attempt
		lastBusy  time.Time // when holderTTL was observed
		holderTTL time.Duration
		attempts  int
		lastErr   error
	)
	if o.Wait > 0 {
		deadline = time.Now().Add(o.Wait)
	}
	for attempt := 0; ; attempt++ {
		start := time.Now()
		fence, busyFor, err := l.store.acquire(ctx, id)
		switch {
		case err == nil && fence > 0:
			lk := newLock(l, key, id, fence, o, start)
			if !l.watchdog.add(lk) {
				l.cleanup(ctx, id)
				return nil, ErrClosed
			}
			return lk, nil
		case err == nil:
			attempts++
			lastErr, holderTTL, lastBusy = nil, busyFor, time.Now()
		default:
			if ctx.Err() != nil {
				lastErr = nil // reported through the context below
			} else {
				lastErr = err
			}
			if maybeSent(err) {
				// The attempt may have taken the lock before its reply was
				// lost: don't leave it blocking others for a whole lease.
				l.cleanup(ctx, id)
			}
		}
		if ctx.Err() != nil {
			return nil, l.notAcquired(key, attempts, holderTTL, lastBusy, context.Cause(ctx))
		}

		sleep := o.Retry.NextBackoff(attempt)
		if busyFor > 0 && busyFor < sleep {
			sleep = busyFor // the holder's lease ends sooner: try right then
		}
		if !deadline.IsZero() {
			sleep = min(sleep, time.Until(deadline))
		}
		if deadline.IsZero() || sleep < 0 || time.Until(deadline) <= 0 {
			if lastErr != nil {
				return nil, unavailable("acquire", lastErr)
			}
			return nil, l.notAcquired(key, attempts, holderTTL, lastBusy, nil)
		}
		if !sleepCtx(ctx, sleep) {
			return nil, l.notAcquired(key, attempts, holderTTL, lastBusy, context.Cause(ctx))
		}
	}
}

func (l *Locker) notAcquired(key string, attempts int, holderTTL time.Duration, seen time.Time, cause error) error {
	if holderTTL > 0 {
		holderTTL = max(holderTTL-time.Since(seen), time.Millisecond)
	}
	return &NotAcquiredError{Key: key, RetryAfter: holderTTL, Attempts: attempts, cause: cause}
}

// cleanupTimeout bounds the best-effort release after a failed attempt.
const cleanupTimeout = time.Second

func (l *Locker) cleanup(ctx context.Context, id *lockID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = l.store.release(ctx, id)
}

// maybeSent reports whether a failed command may have reached Redis: not
// when the connection could not even be made.
func maybeSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return !errors.Is(err, redis.ErrPoolTimeout) && !errors.Is(err, redis.ErrClosed)
}

// sleepCtx sleeps for d or until ctx ends, and reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// newToken returns 128 crypto-random bits, base64url-encoded: an owner value
// no other process can guess or repeat.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	var s [22]byte
	base64.RawURLEncoding.Encode(s[:], b[:])
	return string(s[:])
}

func (l *Locker) String() string { return fmt.Sprintf("padlock.Locker(prefix %q)", l.keys.prefix) }
