package padlock_test

import (
	"context"
	"sync"
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

// BenchmarkRedlock5 is one uncontended lock cycle, Acquire then Release, on
// five independent nodes. The nodes are asked in parallel, so compare it
// with BenchmarkAcquireRelease on one node: the target is at most 1.5x.
// roundtrips/op counts the commands of all nodes together.
func BenchmarkRedlock5(b *testing.B) {
	redistest.Require(b)
	servers := redistest.StartAged(b, 5, rlNodesVote) // up until the nodes may vote ("Delayed restart" in doc.go)
	rt := redistest.CountRoundTrips()
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := s.Client(b, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
		c.AddHook(rt)
		clients[i] = c
	}
	// A node timeout for a loaded machine: it bounds a stall, it does not
	// add to a cycle whose nodes answer.
	l, err := padlock.NewRedlock(clients, padlock.WithMaxLease(rlMaxLease), padlock.WithNodeTimeout(rlNodeTimeout),
		padlock.WithDefaults(padlock.Options{TTL: rlMaxLease}))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	o := padlock.Options{NoRenew: true}
	awaitVotes(b, l) // and warm up: load the scripts, dial, check uptimes
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

// BenchmarkFloor5 is BenchmarkFloor on five nodes at once, each through its
// own go-redis client in its own goroutine: what a parallel five-node lock
// cycle costs before padlock adds anything. Where the machine has fewer
// cores than nodes, loopback round trips are CPU work, and this floor, not
// network latency, bounds BenchmarkRedlock5.
func BenchmarkFloor5(b *testing.B) {
	servers := redistest.StartN(b, 5)
	clients := make([]*redis.Client, len(servers))
	for i, s := range servers {
		clients[i] = s.Client(b)
	}
	ctx := context.Background()
	release := redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
	for _, c := range clients {
		if err := release.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
	}
	const token = "0123456789abcdefghijkl"
	each := func(f func(c *redis.Client) error) {
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				if err := f(c); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		each(func(c *redis.Client) error { return c.SetNX(ctx, "floor", token, 30e9).Err() })
		each(func(c *redis.Client) error { return release.Run(ctx, c, []string{"floor"}, token).Err() })
	}
}
