package padlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func benchClient(b *testing.B) (*redis.Client, *redistest.Counter) {
	rdb := redistest.Start(b).Client(b)
	rt := redistest.CountRoundTrips()
	rdb.AddHook(rt)
	return rdb, rt
}

// BenchmarkAcquireRelease is one uncontended lock cycle: Acquire, then
// Release. Compare it with BenchmarkFloor (benchstat, -count 10).
func BenchmarkAcquireRelease(b *testing.B) {
	rdb, rt := benchClient(b)
	l := padlock.MustNew(b, rdb)
	defer l.Close()
	ctx := context.Background()
	o := padlock.Options{NoRenew: true}
	// Warm up: load the scripts and the connection.
	lk, err := l.Acquire(ctx, "bench", o)
	if err != nil {
		b.Fatal(err)
	}
	lk.Release(ctx)
	rt.Reset()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		lk, err := l.Acquire(ctx, "bench", o)
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rt.Load())/float64(b.N), "roundtrips/op")
}

// BenchmarkAcquireReleaseWaiting is the same cycle for an Acquire that
// would wait (Options.Wait set), as the middleware's usually do: the key is
// free, so it costs what a single attempt does.
func BenchmarkAcquireReleaseWaiting(b *testing.B) {
	rdb, rt := benchClient(b)
	l := padlock.MustNew(b, rdb)
	defer l.Close()
	ctx := context.Background()
	o := padlock.Options{NoRenew: true, Wait: time.Second}
	lk, err := l.Acquire(ctx, "bench", o)
	if err != nil {
		b.Fatal(err)
	}
	lk.Release(ctx)
	rt.Reset()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		lk, err := l.Acquire(ctx, "bench", o)
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rt.Load())/float64(b.N), "roundtrips/op")
}

// BenchmarkFloor is the least a safe lock cycle can cost with go-redis: SET
// NX PX to take the key and one EVALSHA to delete it only if it is still
// ours.
func BenchmarkFloor(b *testing.B) {
	rdb, rt := benchClient(b)
	ctx := context.Background()
	release := redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
	if err := release.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	const token = "0123456789abcdefghijkl"
	rt.Reset()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ok, err := rdb.SetNX(ctx, "floor", token, 30e9).Result()
		if err != nil || !ok {
			b.Fatal("SET NX:", ok, err)
		}
		if err := release.Run(ctx, rdb, []string{"floor"}, token).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rt.Load())/float64(b.N), "roundtrips/op")
}
