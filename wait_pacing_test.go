package padlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

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
	t.Parallel() // its cases are servers of their own
	for _, tc := range []struct {
		name string
		down func(*testing.T, *redistest.Server)
	}{
		{"killed", func(t *testing.T, s *redistest.Server) { s.Kill(t) }},
		{"paused", func(t *testing.T, s *redistest.Server) { s.Pause(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a server of its own; the bound below is half the wait
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
