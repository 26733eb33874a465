package padlockotel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/padlockotel"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// telemetry is an in-memory OpenTelemetry pipeline.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	obs    *padlockotel.Observer
}

func newTelemetry(t testing.TB, opts ...padlockotel.Option) *telemetry {
	t.Helper()
	tel := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	obs, err := padlockotel.New(append([]padlockotel.Option{padlockotel.WithMeterProvider(mp), padlockotel.WithTracerProvider(tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	tel.obs = obs
	return tel
}

// point is one data point: its attributes as "k=v,..." (sorted) and its
// value (a sum, or a histogram's count).
type point struct {
	attrs string
	value int64
}

// collect returns every metric's data points by name.
func (tel *telemetry) collect(t testing.TB) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]point{}
	str := func(s attribute.Set) string {
		var kv []string
		for _, a := range s.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		slices.Sort(kv)
		return strings.Join(kv, ",")
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{str(p.Attributes), p.Value})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{str(p.Attributes), int64(p.Count)})
				}
			}
		}
	}
	return out
}

// value returns the value of metric name's point with attrs, or -1.
func value(ms map[string][]point, name, attrs string) int64 {
	for _, p := range ms[name] {
		if p.attrs == attrs {
			return p.value
		}
	}
	return -1
}

func newLocker(t *testing.T, tel *telemetry) (*padlock.Locker, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	l, err := padlock.New(srv.Client(t), padlock.WithObserver(tel.obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, srv
}

func TestAcquireSpanAndMetrics(t *testing.T) {
	tel := newTelemetry(t)
	l, _ := newLocker(t, tel)
	ctx := context.Background()
	const key = "order:secret-id-42"

	holder, err := l.Acquire(ctx, key, padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 20 * time.Second})
		if err == nil {
			err = lk.Release(ctx)
		}
		got <- err
	}()
	// While the waiter waits, it is counted.
	deadline := time.Now().Add(20 * time.Second)
	for value(tel.collect(t), "padlock.acquire.waiting", "padlock.namespace=order") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("padlock.acquire.waiting: got %v, want 1 while a waiter waits", tel.collect(t)["padlock.acquire.waiting"])
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := value(tel.collect(t), "padlock.locks.held", "padlock.namespace=order"); v != 1 {
		t.Errorf("padlock.locks.held while held: got %d, want 1", v)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}

	ms := tel.collect(t)
	for _, tc := range []struct {
		name, attrs string
		want        int64
	}{
		{"padlock.acquire.duration", "padlock.namespace=order,padlock.outcome=acquired", 2},
		{"padlock.acquire.outcomes", "padlock.namespace=order,padlock.outcome=acquired", 2},
		{"padlock.acquire.waiting", "padlock.namespace=order", 0},
		{"padlock.locks.held", "padlock.namespace=order", 0},
		{"padlock.lock.hold.duration", "padlock.handed_on=false,padlock.namespace=order", 2},
	} {
		if v := value(ms, tc.name, tc.attrs); v != tc.want {
			t.Errorf("%s{%s}: got %d, want %d (all: %v)", tc.name, tc.attrs, v, tc.want, ms[tc.name])
		}
	}
	for name, ps := range ms {
		for _, p := range ps {
			if strings.Contains(p.attrs, "secret-id") {
				t.Errorf("%s carries the raw key: %s", name, p.attrs)
			}
		}
	}

	spans := tel.spans.Ended()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	var events []string
	for _, s := range spans {
		if s.Name() != "padlock.acquire" {
			t.Errorf("span name: got %q, want padlock.acquire", s.Name())
		}
		attrs := map[attribute.Key]string{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value.String()
		}
		if attrs[padlockotel.AttrNamespace] != "order" || attrs[padlockotel.AttrOutcome] != "acquired" {
			t.Errorf("span attributes: got %v, want namespace order, outcome acquired", attrs)
		}
		if _, ok := attrs[padlockotel.AttrKey]; ok {
			t.Errorf("span carries the key without WithKeysInSpans: %v", attrs)
		}
		for _, e := range s.Events() {
			events = append(events, e.Name)
		}
	}
	if !slices.Contains(events, "padlock.busy") {
		t.Errorf("got span events %q, want padlock.busy from the waiter", events)
	}
}

func TestHandOffEvent(t *testing.T) {
	tel := newTelemetry(t)
	l, _ := newLocker(t, tel)
	ctx := context.Background()
	const key = "job:x"
	holder, err := l.Acquire(ctx, key, padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Two waiters: the first takes the lock from Redis with a fence to
	// spare and hands it to the second.
	done := make(chan error, 2)
	for i := range 2 {
		go func() {
			lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 20 * time.Second})
			if err == nil {
				err = lk.Release(ctx)
			}
			done <- err
		}()
		deadline := time.Now().Add(20 * time.Second)
		for value(tel.collect(t), "padlock.acquire.waiting", "padlock.namespace=job") != int64(i+1) {
			if time.Now().After(deadline) {
				t.Fatal("waiter not counted")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond) // let both park
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	ms := tel.collect(t)
	if v := value(ms, "padlock.acquire.outcomes", "padlock.namespace=job,padlock.outcome=handed_off"); v != 1 {
		t.Errorf("handed_off outcomes: got %d, want 1 (%v)", v, ms["padlock.acquire.outcomes"])
	}
	if v := value(ms, "padlock.lock.hold.duration", "padlock.handed_on=true,padlock.namespace=job"); v != 1 {
		t.Errorf("holds handed on: got %d, want 1", v)
	}
	if v := value(ms, "padlock.locks.held", "padlock.namespace=job"); v != 0 {
		t.Errorf("locks held after all released: got %d, want 0", v)
	}
	var handoffs int
	for _, s := range tel.spans.Ended() {
		for _, e := range s.Events() {
			if e.Name == "padlock.handoff" {
				handoffs++
			}
		}
	}
	if handoffs != 1 {
		t.Errorf("got %d padlock.handoff span events, want 1", handoffs)
	}
}

func TestLossAndRenewalFailures(t *testing.T) {
	tel := newTelemetry(t)
	l, srv := newLocker(t, tel)
	ctx := context.Background()
	lk, err := l.Acquire(ctx, "report:daily", padlock.Options{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	<-lk.Done()
	deadline := time.Now().Add(20 * time.Second)
	for value(tel.collect(t), "padlock.lease.renewal.failures", "padlock.namespace=report") < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	srv.Resume(t)
	_ = lk.Release(ctx)
	ms := tel.collect(t)
	for _, tc := range []struct {
		name, attrs string
		atLeast     int64
	}{
		{"padlock.lock.losses", "padlock.lost.cause=lease_expired,padlock.namespace=report", 1},
		{"padlock.lease.renewal.failures", "padlock.namespace=report", 1},
	} {
		if v := value(ms, tc.name, tc.attrs); v < tc.atLeast {
			t.Errorf("%s{%s}: got %d, want at least %d (%v)", tc.name, tc.attrs, v, tc.atLeast, ms[tc.name])
		}
	}
	if v := value(ms, "padlock.locks.held", "padlock.namespace=report"); v != 0 {
		t.Errorf("locks held after the loss: got %d, want 0", v)
	}
}

// TestNamespaceBound checks that namespaces past the bound count as one.
func TestNamespaceBound(t *testing.T) {
	tel := newTelemetry(t, padlockotel.WithMaxNamespaces(2))
	l, _ := newLocker(t, tel)
	ctx := context.Background()
	for i := range 5 {
		lk, err := l.Acquire(ctx, fmt.Sprintf("ns%d:k", i), padlock.Options{NoRenew: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = lk.Release(ctx)
	}
	var got []string
	for _, p := range tel.collect(t)["padlock.acquire.outcomes"] {
		got = append(got, p.attrs)
	}
	slices.Sort(got)
	want := []string{
		"padlock.namespace=(other),padlock.outcome=acquired",
		"padlock.namespace=ns0,padlock.outcome=acquired",
		"padlock.namespace=ns1,padlock.outcome=acquired",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestCycleAllocations checks what the events of an uncontended cycle
// (AcquireStart, AcquireEnd, LockReleased) allocate: the metrics only the
// context the tracer returns, a sampled span only the SDK's own span,
// context and snapshot and one attribute slice (namespace and outcome set
// together at the end). The counts are the SDK's as of this module's
// version; a new SDK may move them.
func TestCycleAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
		want float64
	}{
		{"metrics only", noop.NewTracerProvider(), 1},
		{"every span sampled", tp, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs, err := padlockotel.New(padlockotel.WithMeterProvider(mp), padlockotel.WithTracerProvider(tc.tp))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			got := testing.AllocsPerRun(200, func() {
				c := obs.AcquireStart(ctx, padlock.AcquireStartEvent{Key: "alloc:1"})
				obs.AcquireEnd(c, padlock.AcquireEndEvent{Key: "alloc:1", Outcome: padlock.OutcomeAcquired, Attempts: 1, Wait: time.Millisecond, Fence: 1})
				obs.LockReleased(padlock.LockReleasedEvent{Key: "alloc:1", Fence: 1, Held: time.Millisecond})
			})
			if got > tc.want {
				t.Errorf("got %v allocations per cycle, want at most %v", got, tc.want)
			}
		})
	}
}

// An error that names the key (as a wrapping error might) reaches a span
// with the key's namespace and "…" in its place, in the attempt's event,
// the recorded exception and the status, unless WithKeysInSpans; a real
// outage's error is recorded too.
func TestSpanErrorsDoNotNameTheKey(t *testing.T) {
	const key = "idempotency:POST /orders:alice:8e03978e-7d1c"
	for _, keysInSpans := range []bool{false, true} {
		t.Run(fmt.Sprintf("WithKeysInSpans %v", keysInSpans), func(t *testing.T) {
			var opts []padlockotel.Option
			if keysInSpans {
				opts = append(opts, padlockotel.WithKeysInSpans())
			}
			tel := newTelemetry(t, opts...)
			ctx := tel.obs.AcquireStart(context.Background(), padlock.AcquireStartEvent{Key: key})
			named := fmt.Errorf("%w: acquire %q: i/o timeout", padlock.ErrUnavailable, key)
			tel.obs.AcquireAttempt(ctx, padlock.AcquireAttemptEvent{Key: key, Attempt: 1, Err: named})
			tel.obs.AcquireEnd(ctx, padlock.AcquireEndEvent{Key: key, Outcome: padlock.OutcomeUnavailable, Err: named, Attempts: 1})

			l, srv := newLocker(t, tel)
			srv.Kill(t)
			if _, err := l.Acquire(context.Background(), key, padlock.Options{}); !errors.Is(err, padlock.ErrUnavailable) {
				t.Fatalf("Acquire on a killed server: got %v, want ErrUnavailable", err)
			}

			spans := tel.spans.Ended()
			if len(spans) != 2 {
				t.Fatalf("got %d spans, want 2", len(spans))
			}
			for i, s := range spans {
				var seen []string
				seen = append(seen, s.Status().Description)
				for _, e := range s.Events() {
					for _, a := range e.Attributes {
						seen = append(seen, a.Value.String())
					}
				}
				all := strings.Join(seen, "\n")
				if s.Status().Code != codes.Error {
					t.Errorf("span %d: got status %v, want Error", i, s.Status())
				}
				if got := strings.Contains(all, "8e03978e"); got && !keysInSpans {
					t.Errorf("span %d names the key in its errors:\n%s", i, all)
				}
				if i == 0 && !keysInSpans && !strings.Contains(all, "idempotency:…") {
					t.Errorf("span %d: got errors\n%s\nwant the namespace and … in place of the key", i, all)
				}
				if i == 0 && keysInSpans && !strings.Contains(all, key) {
					t.Errorf("span %d with WithKeysInSpans: got errors\n%s\nwant the key as it is", i, all)
				}
			}
		})
	}
}
