package padlockotel_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
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
// only (the tracer provider a no-op), and with every span sampled and
// exported to memory.
func observers(b *testing.B) []struct {
	name string
	obs  padlock.Observer
} {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	exp := tracetest.NewNoopExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	b.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	metricsOnly, err := padlockotel.New(padlockotel.WithMeterProvider(mp), padlockotel.WithTracerProvider(noopTP{}))
	if err != nil {
		b.Fatal(err)
	}
	full, err := padlockotel.New(padlockotel.WithMeterProvider(mp), padlockotel.WithTracerProvider(tp))
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
			var opts []padlock.Option
			if ob.obs != nil {
				opts = append(opts, padlock.WithObserver(ob.obs))
			}
			l := padlock.New(rdb, opts...)
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
		if ob.name == "observer=slog" || ob.name == "observer=otel-metrics" {
			continue
		}
		b.Run(ob.name, func(b *testing.B) {
			rdb := srv.Client(b)
			var opts []padlock.Option
			if ob.obs != nil {
				opts = append(opts, padlock.WithObserver(ob.obs))
			}
			l := padlock.New(rdb, opts...)
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
