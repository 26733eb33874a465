package padlockotel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/padlockotel"
)

// A Locker that reports to the global OpenTelemetry providers (set them
// with otel.SetTracerProvider and otel.SetMeterProvider at start-up).
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	obs, err := padlockotel.New()
	if err != nil {
		log.Fatal(err)
	}
	l, err := padlock.New(rdb, padlock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
}

// The metrics of a Locker, read back from a meter provider of the
// app's own: each Acquire counts in padlock.acquire.outcomes by the key's
// namespace and its outcome, never by the key.
func ExampleWithMeterProvider() {
	mr := miniredis.NewMiniRedis() // stands in for a real Redis here
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	reader := sdkmetric.NewManualReader() // a Prometheus or OTLP exporter in a service
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := padlockotel.New(padlockotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	l, err := padlock.New(rdb, padlock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx := context.Background()
	lk, err := l.Acquire(ctx, "order:42", padlock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	_, err = l.Acquire(ctx, "order:42", padlock.Options{}) // busy
	fmt.Println(err != nil)
	lk.Release(ctx)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "padlock.acquire.outcomes" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				ns, _ := p.Attributes.Value(padlockotel.AttrNamespace)
				outcome, _ := p.Attributes.Value(padlockotel.AttrOutcome)
				fmt.Println(m.Name, ns.AsString(), outcome.AsString(), p.Value)
			}
		}
	}
	// Unordered output:
	// true
	// padlock.acquire.outcomes order acquired 1
	// padlock.acquire.outcomes order busy 1
}
