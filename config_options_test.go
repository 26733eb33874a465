package padlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

// TestOwner checks that a holder's Options.Owner reaches whoever finds the
// key busy, Inspect and Held, without changing how the lock works.
func TestOwner(t *testing.T) {
	// owned returns a Locker whose default owner is "host=web-1 pid=7",
	// on a server of its own, and another Locker on that server.
	owned := func(t *testing.T) (l, other *padlock.Locker) {
		l, srv, _ := newLocker(t, padlock.WithDefaults(padlock.Options{Owner: "host=web-1 pid=7"}))
		other = padlock.MustNew(t, srv.Client(t))
		t.Cleanup(func() { other.Close() })
		return l, other
	}
	l, other := owned(t)
	ctx := ctxFor(t)
	key := testKey(t)

	for _, tc := range []struct {
		name, owner, want string
	}{
		{"the Locker's", "", "host=web-1 pid=7"},
		{"the Acquire's", "host=web-1 pid=7 req=9f2c", "host=web-1 pid=7 req=9f2c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each waits a lease out, on Lockers of its own.
			t.Parallel()
			l, other := owned(t)
			ctx := ctxFor(t)
			// A lease a loaded machine's watchdog keeps (600 ms once lost
			// its renewals beside two more test runs).
			lk := mustAcquire(t, l, ctx, key, padlock.Options{Owner: tc.owner, TTL: 3 * time.Second})
			// One attempt, then a waiter that marks the lock ('*').
			for _, o := range []padlock.Options{{}, {Wait: 50 * time.Millisecond}} {
				_, err := other.Acquire(ctx, key, o)
				var na *padlock.NotAcquiredError
				if !errors.As(err, &na) || na.Holder != tc.want {
					t.Errorf("busy (Wait %v): got %v (holder %q), want holder %q", o.Wait, err, holder(na), tc.want)
				}
			}
			in, err := other.Inspect(ctx, 0)
			if err != nil || len(in.Locks) != 1 || in.Locks[0].Owner != tc.want || in.Locks[0].Token != lk.Token() {
				t.Errorf("Inspect: got %+v, %v; want owner %q and the lock's token", in, err, tc.want)
			}
			if h := l.Held(); len(h) != 1 || h[0].Owner != tc.want {
				t.Errorf("Held: got %+v, want owner %q", h, tc.want)
			}
			if !strings.HasSuffix(lk.Token(), "~"+tc.want) {
				t.Errorf("Token: got %q, want it to end with ~%s", lk.Token(), tc.want)
			}
			// Renewed and released as any lock.
			time.Sleep(3200 * time.Millisecond)
			if err := lk.Err(); err != nil {
				t.Fatalf("after a lease: got %v, want the lock renewed", err)
			}
			if err := lk.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
	// Fair mode names the holder too.
	fair := mustAcquire(t, l, ctx, key+":fair", padlock.Options{Fair: true})
	_, err := other.Acquire(ctx, key+":fair", padlock.Options{Fair: true, Wait: 50 * time.Millisecond})
	if na := (*padlock.NotAcquiredError)(nil); !errors.As(err, &na) || na.Holder != "host=web-1 pid=7" {
		t.Errorf("fair busy: got %v (holder %q), want holder %q", err, holder(na), "host=web-1 pid=7")
	}
	_ = fair.Release(ctx)

	// No owner: nothing to tell.
	lk := mustAcquire(t, other, ctx, key, padlock.Options{})
	_, err = l.Acquire(ctx, key, padlock.Options{})
	var na *padlock.NotAcquiredError
	if !errors.As(err, &na) || na.Holder != "" {
		t.Errorf("busy without an owner: got %v, holder %q; want none", err, holder(na))
	}
	_ = lk.Release(ctx)

	for _, bad := range []string{"a*b", "tab\there", strings.Repeat("x", padlock.MaxOwnerLen+1), "ünïcode", "x~y"} {
		if _, err := l.Acquire(ctx, key, padlock.Options{Owner: bad}); !errors.Is(err, padlock.ErrInvalid) {
			t.Errorf("Owner %q: got %v, want ErrInvalid", bad, err)
		}
	}
}

// TestRedlockOwner checks that a Redlock holder's Options.Owner reaches
// whoever finds the key busy, named by the busy nodes' votes, and that a
// holder without one is named by none.
func TestRedlockOwner(t *testing.T) {
	// On virtual time, on in-memory nodes that vote at once.
	inBubble(t, func(t *testing.T, b *bubble) {
		l, nodes := b.redlock(3)
		other := b.redlockOn(nodes)
		ctx := context.Background()
		key := testKey(t)

		lk := mustAcquire(t, l, ctx, key, padlock.Options{Owner: "host=web-2 pid=9"})
		for _, o := range []padlock.Options{{}, {Wait: 100 * time.Millisecond}} {
			_, err := other.Acquire(ctx, key, o)
			if na := (*padlock.NotAcquiredError)(nil); !errors.As(err, &na) || na.Holder != "host=web-2 pid=9" {
				t.Errorf("busy (Wait %v): got %v (holder %q), want holder %q", o.Wait, err, holder(na), "host=web-2 pid=9")
			}
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}

		lk = mustAcquire(t, l, ctx, key, padlock.Options{})
		defer lk.Release(ctx)
		_, err := other.Acquire(ctx, key, padlock.Options{})
		if na := (*padlock.NotAcquiredError)(nil); !errors.As(err, &na) || na.Holder != "" {
			t.Errorf("busy without an owner: got %v (holder %q), want none", err, holder(na))
		}
	})
}

func holder(na *padlock.NotAcquiredError) string {
	if na == nil {
		return "<no NotAcquiredError>"
	}
	return na.Holder
}

// TestHoldOwner checks that semaphore permits and read and write holds
// carry their Options.Owner, as a mutex does: Held and the token name it,
// and the hold is renewed and given back as any.
func TestHoldOwner(t *testing.T) {
	t.Parallel() // its cases are servers of their own
	key := testKey(t)
	permit := func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options) (*padlock.Lock, error) {
		sem, err := l.Semaphore(2)
		if err != nil {
			return nil, err
		}
		return sem.Acquire(ctx, key, o)
	}
	for _, tc := range []struct {
		name    string
		acquire func(ctx context.Context, l *padlock.Locker, o padlock.Options) (*padlock.Lock, error)
	}{
		{"permit", func(ctx context.Context, l *padlock.Locker, o padlock.Options) (*padlock.Lock, error) {
			return permit(ctx, l, key+":sem", o)
		}},
		{"fair permit", func(ctx context.Context, l *padlock.Locker, o padlock.Options) (*padlock.Lock, error) {
			o.Fair = true
			return permit(ctx, l, key+":fair", o)
		}},
		{"read", func(ctx context.Context, l *padlock.Locker, o padlock.Options) (*padlock.Lock, error) {
			return l.AcquireRead(ctx, key+":rw", o)
		}},
		{"write", func(ctx context.Context, l *padlock.Locker, o padlock.Options) (*padlock.Lock, error) {
			return l.AcquireWrite(ctx, key+":rw", o)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each waits leases out, on a Locker and server of its own.
			t.Parallel()
			l, _, _ := newLocker(t, padlock.WithDefaults(padlock.Options{Owner: "host=web-1 pid=7"}))
			ctx := ctxFor(t)
			for _, want := range []string{"host=web-1 pid=7", "host=web-1 pid=7 req=a:b"} {
				// Renewed every second: in time on a loaded machine too (a
				// 600ms lease once lost its renewal beside CI, and 1.5 s
				// beside two more runs of the suite).
				o := padlock.Options{TTL: 3 * time.Second}
				if want != "host=web-1 pid=7" {
					o.Owner = want
				}
				lk, err := tc.acquire(ctx, l, o)
				if err != nil {
					t.Fatalf("acquire: %v", err)
				}
				if !strings.HasSuffix(lk.Token(), "~"+want) {
					t.Errorf("Token: got %q, want it to end with ~%s", lk.Token(), want)
				}
				if h := l.Held(); len(h) != 1 || h[0].Owner != want {
					t.Errorf("Held: got %+v, want one hold, owner %q", h, want)
				}
				time.Sleep(o.TTL + 100*time.Millisecond)
				if err := lk.Err(); err != nil {
					t.Fatalf("after a lease: got %v, want the hold renewed", err)
				}
				if err := lk.Release(ctx); err != nil {
					t.Fatalf("Release: %v", err)
				}
			}
		})
	}
}

func TestInvalidInput(t *testing.T) {
	l, _, _ := newLocker(t)
	ctx := ctxFor(t)
	for _, tc := range []struct {
		name, key string
		o         padlock.Options
		field     string
	}{
		{"empty key", "", padlock.Options{}, "key"},
		{"negative TTL", "k", padlock.Options{TTL: -time.Second}, "Options.TTL"},
		{"sub-millisecond TTL", "k", padlock.Options{TTL: 500 * time.Microsecond}, "Options.TTL"},
		{"negative Wait", "k", padlock.Options{Wait: -1}, "Options.Wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lk, err := l.Acquire(ctx, tc.key, tc.o)
			if lk != nil || !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, %v; want an ErrInvalid error naming %s", lk, err, tc.field)
			}
		})
	}
}

// TestCaller checks that Options.Caller follows Options.Owner in what the
// lock carries, read by whoever finds the key busy, Inspect and Held, and
// that a full semaphore names the holder whose permit frees first.
func TestCaller(t *testing.T) {
	l, srv, _ := newLocker(t, padlock.WithDefaults(padlock.Options{Owner: "host=web-1 pid=7"}))
	anon := padlock.MustNew(t, srv.Client(t))
	t.Cleanup(func() { anon.Close() })
	ctx := ctxFor(t)
	key := testKey(t)
	const caller = "route=POST /orders/<id>/pay caller=#3fa9c1e2d4b5"

	for _, tc := range []struct {
		name     string
		l, other *padlock.Locker
		want     string
	}{
		{"after the Locker's owner", l, anon, "host=web-1 pid=7 " + caller},
		{"alone", anon, l, caller},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lk := mustAcquire(t, tc.l, ctx, key, padlock.Options{Caller: caller})
			defer lk.Release(ctx)
			_, err := tc.other.Acquire(ctx, key, padlock.Options{})
			if na := (*padlock.NotAcquiredError)(nil); !errors.As(err, &na) || na.Holder != tc.want {
				t.Errorf("busy: got %v (holder %q), want holder %q", err, holder(na), tc.want)
			}
			if in, err := tc.other.Inspect(ctx, 0); err != nil || len(in.Locks) != 1 || in.Locks[0].Owner != tc.want {
				t.Errorf("Inspect: got %+v, %v; want owner %q", in, err, tc.want)
			}
			if h := tc.l.Held(); len(h) != 1 || h[0].Owner != tc.want {
				t.Errorf("Held: got %+v, want owner %q", h, tc.want)
			}
		})
	}

	t.Run("semaphore", func(t *testing.T) {
		sem, err := l.Semaphore(1)
		if err != nil {
			t.Fatal(err)
		}
		asem, err := anon.Semaphore(1)
		if err != nil {
			t.Fatal(err)
		}
		lk := mustAcquirePermit(t, sem, ctx, key+":sem", padlock.Options{Caller: "job=#a1b2c3d4e5f6"})
		_, err = asem.Acquire(ctx, key+":sem", padlock.Options{})
		if na := (*padlock.NotAcquiredError)(nil); !errors.As(err, &na) || na.Holder != "host=web-1 pid=7 job=#a1b2c3d4e5f6" {
			t.Errorf("full: got %v (holder %q), want the permit's holder", err, holder(na))
		}
		_ = lk.Release(ctx)
		lk = mustAcquirePermit(t, asem, ctx, key+":sem", padlock.Options{})
		defer lk.Release(ctx)
		_, err = sem.Acquire(ctx, key+":sem", padlock.Options{})
		if na := (*padlock.NotAcquiredError)(nil); !errors.As(err, &na) || na.Holder != "" {
			t.Errorf("full, held without an owner: got %v (holder %q), want none", err, holder(na))
		}
	})

	for _, bad := range []string{"a*b", "x~y", "a|b", "ünïcode", strings.Repeat("x", padlock.MaxOwnerLen+1)} {
		if _, err := l.Acquire(ctx, key, padlock.Options{Caller: bad}); !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), "Options.Caller") {
			t.Errorf("Caller %q: got %v, want ErrInvalid naming Options.Caller", bad, err)
		}
	}
}

func mustAcquirePermit(t *testing.T, s *padlock.Semaphore, ctx context.Context, key string, o padlock.Options) *padlock.Lock {
	t.Helper()
	lk, err := s.Acquire(ctx, key, o)
	if err != nil {
		t.Fatalf("Semaphore.Acquire(%q): %v", key, err)
	}
	return lk
}
