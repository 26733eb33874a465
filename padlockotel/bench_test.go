package padlockotel_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/padlockotel"
	"github.com/padlockgo/padlock/padlockslog"
)

// observers are the configurations the benchmarks compare, in one run:
// none, the slog adapter alone, the OpenTelemetry adapter with metrics
// only (the tracer provider a no-op), and with every span sampled
// (AlwaysSample, the SDK's default) and handed to a no-op exporter through
// a batch processor (otel, as a program would) or a simple one
// (otel-simple: no batching goroutine to wake for each span).
func observers(b *testing.B) []struct {
	name string
	obs  padlock.Observer
} {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	exp := tracetest.NewNoopExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	simpleTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	b.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
		_ = simpleTP.Shutdown(context.Background())
	})
	metricsOnly, err := padlockotel.New(padlockotel.WithMeterProvider(mp), padlockotel.WithTracerProvider(noopTP{}))
	if err != nil {
		b.Fatal(err)
	}
	full, err := padlockotel.New(padlockotel.WithMeterProvider(mp), padlockotel.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	simple, err := padlockotel.New(padlockotel.WithMeterProvider(mp), padlockotel.WithTracerProvider(simpleTP))
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		obs  padlock.Observer
	}{
		{"observer=none", nil},
		{"observer=slog", padlockslog.New(slog.New(slog.NewTextHandler(io.Discard, nil)))},
		{"observer=otel-metrics", metricsOnly},
		{"observer=otel", full},
		{"observer=otel-simple", simple},
	}
}

// BenchmarkCycle is one uncontended lock cycle (Acquire, Release) under
// each observer; compare the rows of one run.
func BenchmarkCycle(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	for _, ob := range observers(b) {
		b.Run(ob.name, func(b *testing.B) {
			rdb := srv.Client(b)
			var opts []padlock.LockerOption
			if ob.obs != nil {
				opts = append(opts, padlock.WithObserver(ob.obs))
			}
			l, err := padlock.New(rdb, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			o := padlock.Options{NoRenew: true}
			lk, err := l.Acquire(ctx, "bench:cycle", o)
			if err != nil {
				b.Fatal(err)
			}
			_ = lk.Release(ctx)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				lk, err := l.Acquire(ctx, "bench:cycle", o)
				if err != nil {
					b.Fatal(err)
				}
				if err := lk.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkContended has 32 workers of one Locker take turns on one key,
// holding it 1ms each time; ns/op is per lock cycle, so throughput is its
// inverse.
func BenchmarkContended(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	for _, ob := range observers(b) {
		if ob.name != "observer=none" && ob.name != "observer=otel" {
			continue
		}
		b.Run(ob.name, func(b *testing.B) {
			rdb := srv.Client(b)
			var opts []padlock.LockerOption
			if ob.obs != nil {
				opts = append(opts, padlock.WithObserver(ob.obs))
			}
			l, err := padlock.New(rdb, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			const workers = 32
			o := padlock.Options{Wait: time.Minute}
			var wg sync.WaitGroup
			work := make(chan struct{})
			b.ReportAllocs()
			b.ResetTimer()
			for range workers {
				wg.Go(func() {
					for range work {
						lk, err := l.Acquire(ctx, "bench:contended", o)
						if err != nil {
							b.Error(err)
							return
						}
						time.Sleep(time.Millisecond)
						_ = lk.Release(ctx)
					}
				})
			}
			for i := 0; i < b.N; i++ {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
		})
	}
}

// noopTP is a tracer provider that records nothing, as the global one is
// before a program sets one.
type noopTP struct{ noop.TracerProvider }

// BenchmarkInterleaved compares the cycles of BenchmarkCycle and
// BenchmarkContended without the OpenTelemetry adapter and with it,
// taking turns, so that a machine whose load changes during the run slows
// each alike. The uncontended cycle takes turns cycle by cycle between no
// observer, the adapter on metrics only and the adapter with every span
// sampled (batch and simple processor), and reports each one's time per
// cycle, the process's CPU time per cycle (every goroutine's: the span
// processor's and the collector's
// too; a loaded machine stretches wall time far more than CPU time), and
// the ratios to no observer (otel/none: 1.05 is 5% slower). The contended
// one takes turns in rounds between no observer and every span sampled.
func BenchmarkInterleaved(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	names := []string{"none", "otel-metrics", "otel", "otel-simple"}
	lockers := make([]*padlock.Locker, len(names))
	for _, ob := range observers(b) {
		i := 0
		switch ob.name {
		case "observer=none":
		case "observer=otel-metrics":
			i = 1
		case "observer=otel":
			i = 2
		case "observer=otel-simple":
			i = 3
		default:
			continue
		}
		var opts []padlock.LockerOption
		if ob.obs != nil {
			opts = append(opts, padlock.WithObserver(ob.obs))
		}
		l, err := padlock.New(srv.Client(b), opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		lockers[i] = l
	}
	b.Run("cycle", func(b *testing.B) {
		o := padlock.Options{NoRenew: true}
		cycle := func(l *padlock.Locker) {
			lk, err := l.Acquire(ctx, "bench:interleaved", o)
			if err != nil {
				b.Fatal(err)
			}
			if err := lk.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		for _, l := range lockers {
			cycle(l) // warm up: scripts, connections
		}
		spent, cpu := make([]time.Duration, len(lockers)), make([]time.Duration, len(lockers))
		n := 0
		for b.Loop() {
			i := n % len(lockers)
			start, startCPU := time.Now(), cpuTime()
			cycle(lockers[i])
			cpu[i] += cpuTime() - startCPU
			spent[i] += time.Since(start)
			n++
		}
		if n /= len(lockers); n == 0 {
			return
		}
		per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
		for i, name := range names {
			b.ReportMetric(per(spent[i]), "ns/cycle-"+name)
			b.ReportMetric(per(cpu[i]), "cpu-ns/cycle-"+name)
			if i > 0 {
				b.ReportMetric(float64(spent[i])/float64(spent[0]), name+"/none")
				b.ReportMetric(float64(cpu[i])/float64(cpu[0]), "cpu-"+name+"/none")
			}
		}
	})
	b.Run("contended", func(b *testing.B) {
		const workers, round = 32, 64
		o := padlock.Options{Wait: time.Minute}
		rounds := func(l *padlock.Locker, ops int) time.Duration {
			work := make(chan struct{}, ops)
			for range ops {
				work <- struct{}{}
			}
			close(work)
			start := time.Now()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range work {
						lk, err := l.Acquire(ctx, "bench:contended", o)
						if err != nil {
							b.Error(err)
							return
						}
						time.Sleep(time.Millisecond)
						_ = lk.Release(ctx)
					}
				})
			}
			wg.Wait()
			return time.Since(start)
		}
		var spent [2]time.Duration
		ops := 0
		b.ResetTimer()
		for ops < b.N {
			for i, l := range []*padlock.Locker{lockers[0], lockers[2]} {
				spent[i] += rounds(l, round)
			}
			ops += round
		}
		b.ReportMetric(float64(spent[0].Nanoseconds())/float64(ops), "ns/cycle-none")
		b.ReportMetric(float64(spent[1].Nanoseconds())/float64(ops), "ns/cycle-otel")
		b.ReportMetric(float64(spent[1])/float64(spent[0]), "otel/none")
	})
}

// cpuTime is the CPU time, user and system, the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEvents is the observer's own share of an uncontended cycle,
// without Redis: the events one Acquire and its Release send. On a loaded
// machine the round trips of a real cycle vary far more than this costs,
// so this is the number to hold against a cycle's time; cpu-ns/op, the
// process's CPU time per cycle, is steadier than ns/op there.
func BenchmarkEvents(b *testing.B) {
	ctx := context.Background()
	for _, ob := range observers(b) {
		if ob.obs == nil {
			continue
		}
		b.Run(ob.name, func(b *testing.B) {
			o := ob.obs
			b.ReportAllocs()
			startCPU := cpuTime()
			for b.Loop() {
				c := o.AcquireStart(ctx, padlock.AcquireStartEvent{Key: "bench:events"})
				o.AcquireEnd(c, padlock.AcquireEndEvent{Key: "bench:events", Outcome: padlock.OutcomeAcquired, Attempts: 1, Wait: 100 * time.Microsecond, Fence: 1})
				o.LockReleased(padlock.LockReleasedEvent{Key: "bench:events", Fence: 1, Held: time.Millisecond})
			}
			b.ReportMetric(float64((cpuTime()-startCPU).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
