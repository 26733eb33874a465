package decorator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
	"github.com/padlockgo/padlock/lockkey"
)

// form calls body under the lock on key through one of the package's
// forms, and returns the error the caller gets.
type form struct {
	name string
	call func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options, body func(context.Context) error, opts ...decorator.Option) error
}

func rawKey(k string) (string, error) { return k, nil }

var forms = []form{
	{"WithLock", func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options, body func(context.Context) error, opts ...decorator.Option) error {
		f := decorator.WithLock(l, rawKey, o, func(ctx context.Context, _ string) (int, error) { return 7, body(ctx) }, opts...)
		_, err := f(ctx, key)
		return err
	}},
	{"WithLockErr", func(ctx context.Context, l *padlock.Locker, key string, o padlock.Options, body func(context.Context) error, opts ...decorator.Option) error {
		f := decorator.WithLockErr(l, rawKey, o, func(ctx context.Context, _ string) error { return body(ctx) }, opts...)
		return f(ctx, key)
	}},
	{"Do", decorator.Do},
}

func TestRunsUnderLock(t *testing.T) {
	l, _ := newLocker(t)
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			key := "order:" + f.name
			var inside context.Context
			err := f.call(context.Background(), l, key, padlock.Options{}, func(ctx context.Context) error {
				inside = ctx
				lk := padlock.FromContext(ctx)
				if lk == nil || lk.Key() != key || lk.Fence() <= 0 || ctx.Err() != nil {
					return fmt.Errorf("got lock %v, ctx err %v; want a live lock on %q with a fence", lk, ctx.Err(), key)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if inside.Err() == nil {
				t.Fatal("got fn's context live after the call, want it cancelled")
			}
			checkFree(t, l, key)
		})
	}
}

func TestBusy(t *testing.T) {
	l, _ := newLocker(t)
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			key := "busy:" + f.name
			hold(t, l, key)
			ran := false
			err := f.call(context.Background(), l, key, padlock.Options{Wait: 50 * time.Millisecond}, func(context.Context) error {
				ran = true
				return nil
			})
			if !errors.Is(err, padlock.ErrNotAcquired) || ran {
				t.Fatalf("got %v, fn ran %v; want ErrNotAcquired and fn not run", err, ran)
			}
			if d, ok := padlock.RetryAfter(err); !ok || d <= 0 || d > padlock.DefaultTTL {
				t.Fatalf("got RetryAfter %v, %v; want the holder's remaining lease", d, ok)
			}
		})
	}
}

func TestWaitsForRelease(t *testing.T) {
	l, _ := newLocker(t)
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			key := "wait:" + f.name
			lk := hold(t, l, key)
			var wg sync.WaitGroup
			defer wg.Wait()
			wg.Go(func() {
				time.Sleep(100 * time.Millisecond)
				_ = lk.Release(context.Background())
			})
			ran := false
			err := f.call(context.Background(), l, key, padlock.Options{Wait: 5 * time.Second}, func(context.Context) error {
				ran = true
				return nil
			})
			if err != nil || !ran {
				t.Fatalf("got %v, fn ran %v; want nil and fn run after the holder let go", err, ran)
			}
		})
	}
}

func TestCallerCancelsWait(t *testing.T) {
	l, _ := newLocker(t)
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			key := "cancel:" + f.name
			hold(t, l, key)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			err := f.call(ctx, l, key, padlock.Options{Wait: time.Minute}, func(context.Context) error { return nil })
			if !errors.Is(err, padlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want ErrNotAcquired and context.DeadlineExceeded", err)
			}
		})
	}
}

// Key errors are the caller's: they come back as ErrKey, and Redis is not
// asked (the Locker here points at a port where nothing listens, so asking
// it would give ErrUnavailable instead).
func TestKeyErrors(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	l := lockerOn(t, rdb)

	type order struct{ ID string }
	errBad := errors.New("no tenant in token")
	orderKey := lockkey.Arg("order", func(o order) string { return o.ID })
	never := func(context.Context, order) (int, error) { panic("fn must not run") }
	tests := []struct {
		name    string
		call    func() error
		wantMsg string
		alsoIs  error
	}{
		{"key func error", func() error {
			f := decorator.WithLock(l, func(order) (string, error) { return "", errBad }, padlock.Options{}, never)
			_, err := f(context.Background(), order{ID: "1"})
			return err
		}, "decorator: bad lock key: no tenant in token", errBad},
		{"missing field", func() error {
			_, err := decorator.WithLock(l, orderKey, padlock.Options{}, never)(context.Background(), order{})
			return err
		}, `decorator: bad lock key: lockkey: missing key part "order"`, lockkey.ErrMissingPart},
		{"WithLockErr missing field", func() error {
			f := decorator.WithLockErr(l, orderKey, padlock.Options{}, func(context.Context, order) error { panic("fn must not run") })
			return f(context.Background(), order{})
		}, `decorator: bad lock key: lockkey: missing key part "order"`, lockkey.ErrMissingPart},
		{"key func returns empty", func() error {
			_, err := decorator.WithLock(l, func(order) (string, error) { return "", nil }, padlock.Options{}, never)(context.Background(), order{ID: "1"})
			return err
		}, "decorator: bad lock key: the key is empty", nil},
		{"Do empty key", func() error {
			return decorator.Do(context.Background(), l, "", padlock.Options{}, func(context.Context) error { panic("fn must not run") })
		}, "decorator: bad lock key: the key is empty", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, decorator.ErrKey) || err.Error() != tt.wantMsg {
				t.Fatalf("got %v, want ErrKey with message %q", err, tt.wantMsg)
			}
			if tt.alsoIs != nil && !errors.Is(err, tt.alsoIs) {
				t.Fatalf("got %v, want it to match %v too", err, tt.alsoIs)
			}
		})
	}
	// The same Locker does reach for Redis once the key is good.
	err := decorator.Do(context.Background(), l, "ok", padlock.Options{}, func(context.Context) error { return nil })
	if !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("got %v with a good key, want ErrUnavailable", err)
	}
}

// Decorated functions that call each other, or themselves, on the same key
// get the lock at once instead of deadlocking (Wait is 0: a second real
// Acquire would fail at once with ErrNotAcquired), and an inner call's
// return does not release the outer call's lock.
func TestReentrant(t *testing.T) {
	l, _ := newLocker(t)
	key := lockkey.Arg("order", func(id string) string { return id })
	var fences []int64
	var step func(context.Context, string) (int, error)
	depth := 0
	step = decorator.WithLock(l, key, padlock.Options{}, func(ctx context.Context, id string) (int, error) {
		fences = append(fences, padlock.FromContext(ctx).Fence())
		if depth++; depth < 3 {
			n, err := step(ctx, id)
			if err != nil {
				return 0, err
			}
			if _, err := l.Acquire(context.Background(), "order:"+id, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
				return 0, fmt.Errorf("after the inner call returned: got %v, want the key still held", err)
			}
			return n + 1, nil
		}
		err := decorator.Do(ctx, l, "order:"+id, padlock.Options{}, func(ctx context.Context) error {
			fences = append(fences, padlock.FromContext(ctx).Fence())
			return nil
		})
		return 1, err
	})
	n, err := step(context.Background(), "42")
	if err != nil || n != 3 {
		t.Fatalf("got %d, %v; want 3, nil", n, err)
	}
	if len(fences) != 4 || fences[0] <= 0 || fences[1] != fences[0] || fences[2] != fences[0] || fences[3] != fences[0] {
		t.Fatalf("got fences %v, want four times the outer fence", fences)
	}
	checkFree(t, l, "order:42")
}

// An inner call's context ends when it returns, while the outer one's
// lives on.
func TestInnerContextEnds(t *testing.T) {
	l, _ := newLocker(t)
	err := decorator.Do(context.Background(), l, "k", padlock.Options{}, func(outer context.Context) error {
		var inner context.Context
		if err := decorator.Do(outer, l, "k", padlock.Options{}, func(ctx context.Context) error {
			inner = ctx
			return nil
		}); err != nil {
			return err
		}
		if inner.Err() == nil || outer.Err() != nil {
			return fmt.Errorf("got inner err %v, outer err %v; want inner cancelled, outer live", inner.Err(), outer.Err())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPanicReleases(t *testing.T) {
	l, _ := newLocker(t)
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			key := "panic:" + f.name
			got := func() (v any) {
				defer func() { v = recover() }()
				_ = f.call(context.Background(), l, key, padlock.Options{}, func(context.Context) error { panic("boom") })
				return nil
			}()
			if got != "boom" {
				t.Fatalf("got panic value %v, want boom", got)
			}
			checkFree(t, l, key)
		})
	}
}

var errDeclined = errors.New("card declined")

// A lock lost while fn runs is reported even when fn saw nothing wrong.
// Deleting the key in Redis stands in for a lease that ran out.
func TestLockLost(t *testing.T) {
	l, rdb := newLocker(t)
	tests := []struct {
		name    string
		ttl     time.Duration
		body    func(ctx context.Context) error
		wantIs  []error
		wantMsg string
	}{
		{
			name: "noticed by renewal",
			ttl:  300 * time.Millisecond, // renewed every 100ms
			body: func(ctx context.Context) error {
				<-ctx.Done()
				if c := context.Cause(ctx); c != padlock.ErrLockLost {
					return fmt.Errorf("got cause %v, want ErrLockLost", c)
				}
				return nil
			},
			wantIs:  []error{padlock.ErrLockLost},
			wantMsg: `decorator: lock "lost:%s" was lost while the function ran: padlock: lock lost`,
		},
		{
			name:   "noticed at release",
			ttl:    time.Minute, // no renewal before fn returns
			body:   func(context.Context) error { return nil },
			wantIs: []error{padlock.ErrLockLost},
		},
		{
			name: "fn's own error kept",
			ttl:  300 * time.Millisecond,
			body: func(ctx context.Context) error {
				<-ctx.Done()
				return errDeclined
			},
			wantIs:  []error{padlock.ErrLockLost, errDeclined},
			wantMsg: `card declined (decorator: lock "lost:%s" was lost while the function ran: padlock: lock lost)`,
		},
	}
	for _, tt := range tests {
		for _, f := range forms {
			t.Run(tt.name+"/"+f.name, func(t *testing.T) {
				key := "lost:" + f.name
				err := f.call(context.Background(), l, key, padlock.Options{TTL: tt.ttl}, func(ctx context.Context) error {
					if err := rdb.Del(ctx, "padlock:{"+key+"}").Err(); err != nil {
						return err
					}
					return tt.body(ctx)
				})
				for _, want := range tt.wantIs {
					if !errors.Is(err, want) {
						t.Fatalf("got %v, want it to match %v", err, want)
					}
				}
				if tt.wantMsg != "" && err.Error() != fmt.Sprintf(tt.wantMsg, f.name) {
					t.Fatalf("got %q, want %q", err, fmt.Sprintf(tt.wantMsg, f.name))
				}
			})
		}
	}
}

// WithLock returns fn's result along with the lost error: the caller
// decides, knowing the work may have overlapped with another holder's.
func TestLockLostKeepsResult(t *testing.T) {
	l, rdb := newLocker(t)
	charge := decorator.WithLock(l, rawKey, padlock.Options{}, func(ctx context.Context, key string) (string, error) {
		if err := rdb.Del(ctx, "padlock:{"+key+"}").Err(); err != nil {
			return "", err
		}
		return "ch_1", nil
	})
	got, err := charge(context.Background(), "order:7")
	if got != "ch_1" || !errors.Is(err, padlock.ErrLockLost) {
		t.Fatalf("got %q, %v; want ch_1 and ErrLockLost", got, err)
	}
}

// Concurrent callers of one wrapped function run one at a time.
func TestExclusion(t *testing.T) {
	l, _ := newLocker(t)
	var active, maxActive, runs atomic.Int64
	work := decorator.WithLockErr(l, lockkey.Arg("job", func(s string) string { return s }),
		padlock.Options{Wait: 20 * time.Second},
		func(ctx context.Context, _ string) error {
			n := active.Add(1)
			defer active.Add(-1)
			for m := maxActive.Load(); n > m && !maxActive.CompareAndSwap(m, n); m = maxActive.Load() {
			}
			runs.Add(1)
			time.Sleep(2 * time.Millisecond)
			return nil
		})
	const callers = 30
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { errs <- work(context.Background(), "nightly") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != callers || maxActive.Load() != 1 {
		t.Fatalf("got %d runs, at most %d at once; want %d runs, 1 at once", runs.Load(), maxActive.Load(), callers)
	}
}

func TestConstructionPanics(t *testing.T) {
	l, _ := newLocker(t)
	fn := func(context.Context, string) (int, error) { return 0, nil }
	efn := func(context.Context, string) error { return nil }
	tests := []struct {
		name string
		make func()
		want string
	}{
		{"nil locker", func() { decorator.WithLock(nil, rawKey, padlock.Options{}, fn) }, "decorator: WithLock: nil *padlock.Locker"},
		{"nil key", func() { decorator.WithLock(l, nil, padlock.Options{}, fn) }, "decorator: WithLock: nil key func"},
		{"nil fn", func() { decorator.WithLock[string, int](l, rawKey, padlock.Options{}, nil) }, "decorator: WithLock: nil fn"},
		{"bad options", func() { decorator.WithLock(l, rawKey, padlock.Options{Wait: -1}, fn) }, "decorator: WithLock: padlock: invalid argument: Options.Wait"},
		{"WithLockErr nil fn", func() { decorator.WithLockErr[string](l, rawKey, padlock.Options{}, nil) }, "decorator: WithLockErr: nil fn"},
		{"WithLockErr bad options", func() { decorator.WithLockErr(l, rawKey, padlock.Options{TTL: -1}, efn) }, "decorator: WithLockErr: padlock: invalid argument: Options.TTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); !strings.HasPrefix(got, tt.want) {
					t.Fatalf("got panic %q, want one starting %q", got, tt.want)
				}
			}()
			tt.make()
		})
	}
}

// Do is called at request time: bad arguments are errors, not panics.
func TestDoInvalid(t *testing.T) {
	l, _ := newLocker(t)
	tests := []struct {
		name string
		l    *padlock.Locker
		o    padlock.Options
		fn   func(context.Context) error
	}{
		{"nil locker", nil, padlock.Options{}, func(context.Context) error { return nil }},
		{"nil fn", l, padlock.Options{}, nil},
		{"bad options", l, padlock.Options{TTL: -1}, func(context.Context) error { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := decorator.Do(context.Background(), tt.l, "k", tt.o, tt.fn); !errors.Is(err, padlock.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

// Keys too long for Redis comfort are hashed, as the middleware does.
func TestLongKeyShortened(t *testing.T) {
	l, _ := newLocker(t)
	long := "doc:" + strings.Repeat("x", 500)
	err := decorator.Do(context.Background(), l, long, padlock.Options{}, func(ctx context.Context) error {
		if got, want := padlock.FromContext(ctx).Key(), lockkey.Shorten(long); got != want || len(got) > lockkey.MaxKeyLen {
			return fmt.Errorf("got key %q, want %q", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
