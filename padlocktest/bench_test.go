package padlocktest_test

import (
	"context"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/padlocktest"
)

// BenchmarkStart measures what an Env costs a test: start, one lock cycle
// (the first command dials), close.
func BenchmarkStart(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		env, err := padlocktest.Start()
		if err != nil {
			b.Fatal(err)
		}
		lk, err := env.Locker().Acquire(ctx, "k", padlock.Options{})
		if err != nil {
			b.Fatal(err)
		}
		_ = lk.Release(ctx)
		_ = env.Close()
	}
}

// BenchmarkBusy measures a 409 round: Busy, the refused Acquire, release.
func BenchmarkBusy(b *testing.B) {
	b.ReportAllocs()
	env := padlocktest.New(b)
	ctx := context.Background()
	for b.Loop() {
		holder, err := env.Busy(ctx, "k", 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.Locker().Acquire(ctx, "k", padlock.Options{}); err == nil {
			b.Fatal("Acquire of a busy key succeeded")
		}
		_ = holder.Release(ctx)
	}
}
