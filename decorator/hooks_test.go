package decorator_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
	"github.com/padlockgo/padlock/internal/redistest"
)

// hooks records what WithAcquireError and WithReleaseError are told.
type hooks struct {
	mu               sync.Mutex
	acquire, release []string // "key: error"
	acquireErrs      []error
	releaseErrs      []error
}

func (h *hooks) opts() []decorator.Option {
	return []decorator.Option{
		decorator.WithAcquireError(func(_ context.Context, key string, err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.acquire = append(h.acquire, key)
			h.acquireErrs = append(h.acquireErrs, err)
		}),
		decorator.WithReleaseError(func(_ context.Context, key string, err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.release = append(h.release, key)
			h.releaseErrs = append(h.releaseErrs, err)
		}),
	}
}

// The hooks are told of every call that did not run for want of the lock,
// and of every release that failed, including one the call's result does
// not show (Redis gone at release time); calls that went well tell
// nothing.
func TestHooks(t *testing.T) {
	tests := []struct {
		name        string
		key         string
		setup       func(t *testing.T, l *padlock.Locker, srv *redistest.Server, key string) func(ctx context.Context) error
		wantAcquire error
		wantRelease error
	}{
		{"ok", "ok", func(*testing.T, *padlock.Locker, *redistest.Server, string) func(context.Context) error {
			return func(context.Context) error { return nil }
		}, nil, nil},
		{"busy", "busy", func(t *testing.T, l *padlock.Locker, _ *redistest.Server, key string) func(context.Context) error {
			hold(t, l, key)
			return func(context.Context) error { return nil }
		}, padlock.ErrNotAcquired, nil},
		{"empty key", "", func(*testing.T, *padlock.Locker, *redistest.Server, string) func(context.Context) error {
			return func(context.Context) error { return nil }
		}, decorator.ErrKey, nil},
		{"lock lost", "lost", func(t *testing.T, _ *padlock.Locker, srv *redistest.Server, key string) func(context.Context) error {
			return func(ctx context.Context) error { return srv.Client(t).Del(ctx, "padlock:{"+key+"}").Err() }
		}, nil, padlock.ErrNotHeld},
		{"redis gone at release", "gone", func(t *testing.T, _ *padlock.Locker, srv *redistest.Server, _ string) func(context.Context) error {
			return func(context.Context) error { srv.Kill(t); return nil }
		}, nil, padlock.ErrUnavailable},
	}
	for _, tt := range tests {
		for _, f := range forms {
			t.Run(tt.name+"/"+f.name, func(t *testing.T) {
				srv := redistest.Start(t)
				l := lockerOn(t, srv.Client(t))
				key := tt.key
				if key != "" {
					key += ":" + f.name
				}
				var h hooks
				body := tt.setup(t, l, srv, key)
				err := f.call(context.Background(), l, key, padlock.Options{}, body, h.opts()...)
				checkHook(t, "WithAcquireError", h.acquire, h.acquireErrs, tt.wantAcquire, key)
				checkHook(t, "WithReleaseError", h.release, h.releaseErrs, tt.wantRelease, key)
				if tt.wantAcquire != nil && !errors.Is(err, tt.wantAcquire) {
					t.Fatalf("got call error %v, want it to match %v", err, tt.wantAcquire)
				}
			})
		}
	}
}

func checkHook(t *testing.T, name string, keys []string, errs []error, want error, key string) {
	t.Helper()
	if want == nil {
		if len(errs) != 0 {
			t.Fatalf("%s: got told %v, want nothing", name, errs)
		}
		return
	}
	if len(errs) != 1 || !errors.Is(errs[0], want) || keys[0] != key {
		t.Fatalf("%s: got told %q %v, want once for %q with an error matching %v", name, keys, errs, key, want)
	}
}

func TestHookOptionsInvalid(t *testing.T) {
	l, _ := newLocker(t)
	err := decorator.Do(context.Background(), l, "k", padlock.Options{}, func(context.Context) error { return nil }, decorator.WithReleaseError(nil))
	if !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), "WithReleaseError: nil func") {
		t.Fatalf("Do: got %v, want ErrInvalid naming WithReleaseError", err)
	}
	defer func() {
		if got, _ := recover().(string); got != "decorator: WithLockErr: WithAcquireError: nil func" {
			t.Fatalf("WithLockErr: got panic %q, want it to name WithAcquireError", got)
		}
	}()
	decorator.WithLockErr(l, rawKey, padlock.Options{}, func(context.Context, string) error { return nil }, decorator.WithAcquireError(nil))
}
