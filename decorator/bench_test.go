package decorator_test

import (
	"context"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
	"github.com/padlockgo/padlock/lockkey"
)

// BenchmarkCycle compares one uncontended lock cycle through the decorator
// with the same cycle written by hand (Acquire, Context, Release), on one
// Redis server: the difference is the decorator's overhead.
func BenchmarkCycle(b *testing.B) {
	l, _ := newLocker(b)
	ctx := context.Background()
	work := func(ctx context.Context, id string) (int, error) { return len(id), nil }
	key := lockkey.Arg("order", func(id string) string { return id })

	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			k, err := key("42")
			if err != nil {
				b.Fatal(err)
			}
			lk, err := l.Acquire(ctx, k, padlock.Options{})
			if err != nil {
				b.Fatal(err)
			}
			_, _ = work(lk.Context(ctx), "42")
			if err := lk.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As direct, releasing the way the decorator does: on a detached
	// context with a timeout, so a cancelled caller still releases.
	b.Run("direct-bounded-release", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			k, err := key("42")
			if err != nil {
				b.Fatal(err)
			}
			lk, err := l.Acquire(ctx, k, padlock.Options{})
			if err != nil {
				b.Fatal(err)
			}
			_, _ = work(lk.Context(ctx), "42")
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err = lk.Release(rctx)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WithLock", func(b *testing.B) {
		f := decorator.WithLock(l, key, padlock.Options{}, work)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f(ctx, "42"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WithLockErr", func(b *testing.B) {
		f := decorator.WithLockErr(l, key, padlock.Options{}, func(context.Context, string) error { return nil })
		b.ReportAllocs()
		for b.Loop() {
			if err := f(ctx, "42"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Do", func(b *testing.B) {
		fn := func(context.Context) error { return nil }
		b.ReportAllocs()
		for b.Loop() {
			if err := decorator.Do(ctx, l, "order:42", padlock.Options{}, fn); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A nested call on a key the context already holds: no Redis at all.
	b.Run("reentrant", func(b *testing.B) {
		f := decorator.WithLock(l, key, padlock.Options{}, work)
		outer, err := l.Acquire(ctx, "order:42", padlock.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer outer.Release(ctx)
		held := outer.Context(ctx)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f(held, "42"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
