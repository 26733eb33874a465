package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestMutualExclusionCounter(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)

	const workers, rounds = 100, 3
	counter := 0 // deliberately not atomic: only the lock protects it
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for range workers {
		wg.Go(func() {
			for range rounds {
				lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 20 * time.Second})
				if err != nil {
					errs <- err
					return
				}
				v := counter
				time.Sleep(time.Microsecond) // widen the race window
				counter = v + 1
				if err := lk.Release(ctx); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	if counter != workers*rounds {
		t.Fatalf("counter = %d, want %d", counter, workers*rounds)
	}
}

func TestBusyKeyNotAcquired(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	holder := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 10 * time.Second})
	defer holder.Release(ctx)

	_, err := l.Acquire(ctx, key, padlock.Options{})
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("Acquire of a held key: got %v, want ErrNotAcquired", err)
	}
	var na *padlock.NotAcquiredError
	if !errors.As(err, &na) || na.Key != key || na.Attempts != 1 {
		t.Fatalf("got %#v, want a NotAcquiredError for %q after 1 attempt", err, key)
	}
	d, ok := padlock.RetryAfter(err)
	if !ok || d <= 9*time.Second || d > 10*time.Second {
		t.Fatalf("RetryAfter = %v, %v; want the holder's remaining lease, about 10s", d, ok)
	}
	if errors.Is(err, padlock.ErrUnavailable) || errors.Is(err, context.Canceled) {
		t.Fatalf("busy error %v also matches ErrUnavailable or Canceled", err)
	}
}

func TestExpiryFreesCrashedHolder(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	// A holder that "crashes": it never releases and nothing renews it.
	crashed := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 200 * time.Millisecond, NoRenew: true})
	_ = crashed

	if _, err := l.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("before expiry: got %v, want ErrNotAcquired", err)
	}
	start := time.Now()
	lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	defer lk.Release(ctx)
	// The waiter sleeps until the lease ends, not for its whole budget.
	if waited := time.Since(start); waited > 4*time.Second {
		t.Fatalf("waited %v for a 200ms lease", waited)
	}
	if lk.Fence() <= crashed.Fence() {
		t.Fatalf("fence %d after expiry, want > the crashed holder's %d", lk.Fence(), crashed.Fence())
	}
}

func TestWaitSucceedsWhenHolderReleases(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	holder := mustAcquire(t, l, ctx, key, padlock.Options{TTL: 30 * time.Second})

	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		released <- time.Now()
		holder.Release(ctx)
	}()
	lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("waiting Acquire: %v", err)
	}
	defer lk.Release(ctx)
	at := <-released
	if lk.Fence() <= holder.Fence() {
		t.Fatalf("fence %d, want > holder's %d", lk.Fence(), holder.Fence())
	}
	// The waiter must not have slept through the holder's 30s lease.
	if late := time.Since(at); late > 5*time.Second {
		t.Fatalf("acquired %v after the release", late)
	}
}

func TestWaitGivesUpOnTime(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	holder := mustAcquire(t, l, ctx, key, padlock.Options{})
	defer holder.Release(ctx)

	const wait = 300 * time.Millisecond
	start := time.Now()
	_, err := l.Acquire(ctx, key, padlock.Options{Wait: wait})
	took := time.Since(start)
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("got %v, want ErrNotAcquired", err)
	}
	var na *padlock.NotAcquiredError
	if errors.As(err, &na); na.Attempts < 2 {
		t.Fatalf("%d attempts in %v of waiting, want retries", na.Attempts, wait)
	}
	// Lower bound only: the wait must be used. (No upper bound tighter than
	// a generous one: shared machines stall.)
	if took < wait || took > wait+5*time.Second {
		t.Fatalf("gave up after %v, want about %v", took, wait)
	}
}

func TestContextCancelEndsWait(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	key := testKey(t)
	holder := mustAcquire(t, l, ctx, key, padlock.Options{})
	defer holder.Release(ctx)

	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			time.AfterFunc(100*time.Millisecond, cancel)
			return c, cancel
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"already canceled", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return c, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			_, err := l.Acquire(c, key, padlock.Options{Wait: time.Minute})
			if !errors.Is(err, padlock.ErrNotAcquired) || !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want ErrNotAcquired and %v", err, tc.want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("returned %v after the context ended", took)
			}
		})
	}
}

func TestNewPanicsOnBadConfiguration(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	for _, tc := range []struct {
		name  string
		build func()
		want  string
	}{
		{"nil client", func() { padlock.New(nil) }, "redis client is nil"},
		{"brace in prefix", func() { padlock.New(rdb, padlock.WithKeyPrefix("app{1}:")) }, "WithKeyPrefix"},
		{"bad default TTL", func() { padlock.New(rdb, padlock.WithDefaults(padlock.Options{TTL: -1})) }, "Options.TTL"},
		{"replica ack without replicas", func() { padlock.New(rdb, padlock.WithReplicaAck(0, time.Second)) }, "WithReplicaAck"},
		{"replica ack beyond ReadTimeout", func() {
			c := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, ReadTimeout: time.Second, ContextTimeoutEnabled: true})
			defer c.Close()
			padlock.New(c, padlock.WithReplicaAck(1, time.Second))
		}, "ReadTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				err, _ := r.(error)
				if !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("panic value %v, want an ErrInvalid error naming %q", r, tc.want)
				}
			}()
			tc.build()
		})
	}
}

// TestNewRefusesClientIgnoringDeadlines: without ContextTimeoutEnabled
// go-redis keeps context deadlines off the socket, and a request waits for
// a hung Redis as long as the client's ReadTimeout, whatever its deadline
// and Options.Wait say. New returns an error naming the option for every
// go-redis client kind, never a panic, and takes the same client with it.
func TestNewRefusesClientIgnoringDeadlines(t *testing.T) {
	const addr = "127.0.0.1:1" // never dialled: New sends nothing
	for _, tc := range []struct {
		name    string
		options string // named in the error
		client  func(deadlines bool) redis.UniversalClient
	}{
		{"plain", "redis.Options", func(on bool) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: on})
		}},
		{"failover", "redis.FailoverOptions", func(on bool) redis.UniversalClient {
			return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{addr}, ContextTimeoutEnabled: on})
		}},
		{"cluster", "redis.ClusterOptions", func(on bool) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: on})
		}},
		{"ring", "redis.RingOptions", func(on bool) redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ContextTimeoutEnabled: on})
		}},
	} {
		for _, on := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ContextTimeoutEnabled=%v", tc.name, on), func(t *testing.T) {
				c := tc.client(on)
				t.Cleanup(func() { _ = c.Close() })
				var (
					l   *padlock.Locker
					err error
				)
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("New panicked: %v; want an error", r)
						}
					}()
					l, err = padlock.New(c)
				}()
				if on {
					if l == nil || err != nil {
						t.Fatalf("got %v, %v; want a Locker", l, err)
					}
					_ = l.Close()
					return
				}
				if l != nil || !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), tc.options+".ContextTimeoutEnabled") {
					t.Fatalf("got %v, %v; want no Locker and an ErrInvalid error naming %s.ContextTimeoutEnabled", l, err, tc.options)
				}
			})
		}
	}
	t.Run("other UniversalClient", func(t *testing.T) {
		// Not one of go-redis's own: its options are not known, so it is
		// taken as it is.
		c := struct{ *redis.Client }{redis.NewClient(&redis.Options{Addr: addr})}
		t.Cleanup(func() { _ = c.Close() })
		l, err := padlock.New(c)
		if err != nil {
			t.Fatalf("got %v; want a Locker", err)
		}
		_ = l.Close()
	})
}

func TestRedisDownIsUnavailable(t *testing.T) {
	l, srv, _ := newLocker(t)
	ctx := ctxFor(t)
	srv.Kill(t)
	for _, wait := range []time.Duration{0, 200 * time.Millisecond} {
		lk, err := l.Acquire(ctx, testKey(t), padlock.Options{Wait: wait})
		if lk != nil || !errors.Is(err, padlock.ErrUnavailable) || errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("Wait %v: got %v, %v; want ErrUnavailable only", wait, lk, err)
		}
	}
}

// TestRedisDownFailsFast waits for a key on a server that is gone or
// hangs: Acquire must report ErrUnavailable after a failed attempt or two,
// well before its wait is over.
func TestRedisDownFailsFast(t *testing.T) {
	for _, tc := range []struct {
		name string
		down func(*testing.T, *redistest.Server)
	}{
		{"killed", func(t *testing.T, s *redistest.Server) { s.Kill(t) }},
		{"paused", func(t *testing.T, s *redistest.Server) { s.Pause(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, srv, _ := newLocker(t)
			ctx := ctxFor(t)
			tc.down(t, srv)
			const wait = 10 * time.Second
			start := time.Now()
			lk, err := l.Acquire(ctx, testKey(t), padlock.Options{Wait: wait})
			took := time.Since(start)
			if lk != nil || !errors.Is(err, padlock.ErrUnavailable) {
				t.Fatalf("got %v, %v; want ErrUnavailable", lk, err)
			}
			// A dial fails at once, a hung server in its 1s read timeout
			// (and the 1s clean-up after it): half the wait is slack.
			if took > wait/2 {
				t.Fatalf("gave up after %v of a %v wait; want an early ErrUnavailable", took, wait)
			}
		})
	}
}

// TestRedisKey: RedisKey names the key Acquire writes the token to, also
// for keys with the characters the layout escapes.
func TestRedisKey(t *testing.T) {
	l, _, rdb := newLocker(t, padlock.WithKeyPrefix("app:"))
	ctx := ctxFor(t)
	for _, key := range []string{"order:1", `a{b}c\d`, "{"} {
		lk := mustAcquire(t, l, ctx, key, padlock.Options{})
		if v, err := rdb.Get(ctx, l.RedisKey(key)).Result(); err != nil || padlock.StoredToken(v) != lk.Token() {
			t.Errorf("RedisKey(%q) = %q holds %q (%v), want the lock's token", key, l.RedisKey(key), v, err)
		}
		lk.Release(ctx)
	}
}
