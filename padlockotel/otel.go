// Package padlockotel reports a padlock Locker to OpenTelemetry: a span
// per Acquire, and metrics of waits, hold times, outcomes, losses,
// renewals and the locks held and waited for. It is a padlock.Observer:
//
//	obs, err := padlockotel.New() // the global providers, or WithTracerProvider / WithMeterProvider
//	l, err := padlock.New(rdb, padlock.WithObserver(obs))
//
// Only users of this package compile OpenTelemetry; the padlock engine
// does not import it.
//
// # Attributes
//
// A lock key is request data (an order id, a client's idempotency key):
// it never becomes a metric attribute, whose values must stay few, and it
// is kept out of spans, and out of the errors they record, unless
// WithKeysInSpans. Metrics carry the key's
// namespace instead: the part before the first ':' ("order" for
// "order:42"), "(none)" for a key without one, or what WithNamespace's
// function says. Past WithMaxNamespaces distinct namespaces (default 100)
// further ones are reported as "(other)", so a namespace taken from user
// input cannot grow the metrics without bound.
//
// # Metrics
//
//	name                            instrument      unit         attributes
//	padlock.acquire.duration        histogram       s            padlock.namespace, padlock.outcome
//	padlock.acquire.outcomes        counter         {acquire}    padlock.namespace, padlock.outcome
//	padlock.acquire.waiting         updowncounter   {acquire}    padlock.namespace
//	padlock.lock.hold.duration      histogram       s            padlock.namespace, padlock.handed_on
//	padlock.locks.held              updowncounter   {lock}       padlock.namespace
//	padlock.lock.losses             counter         {lock}       padlock.namespace, padlock.lost.cause
//	padlock.lease.renewal.lag       histogram       s            padlock.namespace
//	padlock.lease.renewal.failures  counter         {renewal}    padlock.namespace
//	padlock.notices.unavailable     counter         {acquire}    padlock.namespace
//	padlock.redlock.votes           counter         {vote}       padlock.redlock.op, padlock.redlock.node, padlock.redlock.node.outcome
//
// padlock.outcome is one of acquired, handed_off, reentrant, busy,
// unavailable, cancelled, closed, invalid; padlock.lost.cause one of
// token_gone, lease_expired, locker_closed (padlock.AcquireOutcome and
// padlock.LostCause). padlock.redlock.node is the node's address as its
// client names it: bounded by the Locker's configuration.
//
// # Spans
//
// Each Acquire is a span "padlock.acquire" (kind internal). When it ends
// it gets padlock.namespace and padlock.outcome, and padlock.attempts
// unless it made exactly one attempt. (Both are set at the end, in one
// call, so that a sampled span's attributes cost one allocation and an
// unsampled span's none; a sampler therefore sees no padlock attribute at
// the span's start. The fence is left out: every attribute costs each
// Acquire an allocation.) A waiting Acquire adds an event per busy attempt
// ("padlock.busy", with padlock.attempt and padlock.holder_ttl_ms), per
// failed attempt ("padlock.attempt_failed", with the error), and
// "padlock.wait" when it starts to wait in its Locker's line, and
// "padlock.handoff" when a holder of the same Locker handed it the lock.
// Redis commands of the Acquire run in the span's context, so a go-redis
// tracing hook puts them under it. Outcomes unavailable, closed and
// invalid set the span's status to Error.
//
// # Cost
//
// On metrics only, the adapter adds one allocation to an uncontended lock
// cycle (Acquire and Release, 25 allocations without an observer) and
// under a µs of CPU, nothing measurable against the cycle's round trips.
// Every span sampled adds 4 allocations (5 with the simple processor)
// and a few µs of the SDK's span work, and in BenchmarkInterleaved a
// cycle of 90-150 µs took 1.14-1.26 times as long; sample spans where
// that matters. The benchmarks in this package measure it on a machine.
package padlockotel

import (
	"context"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/keyattr"
)

// ScopeName is the instrumentation scope of padlock's tracer and meter.
const ScopeName = "github.com/padlockgo/padlock/padlockotel"

// OtherNamespace is the namespace reported for keys past WithMaxNamespaces.
const OtherNamespace = "(other)"

// Attribute keys.
const (
	AttrNamespace   = attribute.Key("padlock.namespace")
	AttrOutcome     = attribute.Key("padlock.outcome")
	AttrHandedOn    = attribute.Key("padlock.handed_on")
	AttrLostCause   = attribute.Key("padlock.lost.cause")
	AttrAttempts    = attribute.Key("padlock.attempts")
	AttrAttempt     = attribute.Key("padlock.attempt")
	AttrHolderTTL   = attribute.Key("padlock.holder_ttl_ms")
	AttrKey         = attribute.Key("padlock.key")
	AttrRedlockOp   = attribute.Key("padlock.redlock.op")
	AttrRedlockNode = attribute.Key("padlock.redlock.node")
	AttrNodeOutcome = attribute.Key("padlock.redlock.node.outcome")
)

// An Option configures New.
type Option func(*config)

type config struct {
	tp          trace.TracerProvider
	mp          metric.MeterProvider
	namespace   func(key string) string
	maxNS       int
	keysInSpans bool
}

// WithTracerProvider sets where spans go. Default: otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithMeterProvider sets where metrics go. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithNamespace sets the function that names a key's namespace, the one
// attribute metrics carry about the key. It must return few distinct
// values (a fixed set), never the key or a part of it that comes from a
// request. Default: the part of the key before its first ':', or "(none)".
func WithNamespace(f func(key string) string) Option { return func(c *config) { c.namespace = f } }

// WithMaxNamespaces bounds how many distinct namespaces the metrics
// carry; keys of further namespaces count as "(other)". Default: 100.
func WithMaxNamespaces(n int) Option { return func(c *config) { c.maxNS = n } }

// WithKeysInSpans adds the lock key itself to each Acquire's span
// (padlock.key), and leaves it in the errors spans record. Only for keys
// that whoever reads the traces may see. Default: off; spans carry the
// namespace alone, and an error whose text names the key (an attempt's,
// the Acquire's) shows the namespace and "…" in its place.
func WithKeysInSpans() Option { return func(c *config) { c.keysInSpans = true } }

// Observer is the padlock.Observer New returns. It is safe for
// concurrent use; one may serve several Lockers.
type Observer struct {
	tracer      trace.Tracer
	namespace   func(string) string
	maxNS       int
	keysInSpans bool

	acquireDur metric.Float64Histogram
	outcomes   metric.Int64Counter
	waiting    metric.Int64UpDownCounter
	holdDur    metric.Float64Histogram
	held       metric.Int64UpDownCounter
	losses     metric.Int64Counter
	renewLag   metric.Float64Histogram
	renewFail  metric.Int64Counter
	polling    metric.Int64Counter
	votes      metric.Int64Counter

	mu sync.Mutex // serializes adding namespaces
	// ns maps a namespace to its attributes. Copied on write (namespaces
	// are few and soon all known), so a lookup takes no lock and boxes
	// nothing.
	ns atomic.Pointer[map[string]*nsAttrs]
}

// nsAttrs are one namespace's attribute options, built once: recording a
// measurement with them allocates nothing.
type nsAttrs struct {
	add     []metric.AddOption
	record  []metric.RecordOption
	outcome [9]nsPair // by padlock.AcquireOutcome
	// spanEnd is the namespace and the outcome, set in one call when the
	// span ends: the span's attribute slice then grows once, where
	// setting the namespace at its start costs an option copy and two
	// growths per Acquire, and an unsampled span costs nothing.
	spanEnd [9][]attribute.KeyValue
	handed  [2][]metric.RecordOption
	lost    [4][]metric.AddOption // by padlock.LostCause
}

// spanStart are the options of every Acquire's span, built once.
var spanStart = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}

type nsPair struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// Bucket boundaries in seconds: waits and renewal lags from 0.5ms to a
// minute, hold times to an hour.
var (
	waitBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}
)

// New returns an Observer reporting to the global providers unless
// WithTracerProvider or WithMeterProvider say otherwise. It fails only
// when the meter provider refuses an instrument.
func New(opts ...Option) (*Observer, error) {
	c := config{namespace: keyattr.Namespace, maxNS: 100}
	for _, opt := range opts {
		opt(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.namespace == nil {
		c.namespace = keyattr.Namespace
	}
	o := &Observer{
		tracer:      c.tp.Tracer(ScopeName),
		namespace:   c.namespace,
		maxNS:       max(c.maxNS, 1),
		keysInSpans: c.keysInSpans,
	}
	m := c.mp.Meter(ScopeName)
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	o.acquireDur, err = m.Float64Histogram("padlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from an Acquire's call to its return, by outcome."), metric.WithExplicitBucketBoundaries(waitBuckets...))
	check(err)
	o.outcomes, err = m.Int64Counter("padlock.acquire.outcomes", metric.WithUnit("{acquire}"),
		metric.WithDescription("Acquire calls, by outcome."))
	check(err)
	o.waiting, err = m.Int64UpDownCounter("padlock.acquire.waiting", metric.WithUnit("{acquire}"),
		metric.WithDescription("Acquire calls waiting for a busy key right now."))
	check(err)
	o.holdDur, err = m.Float64Histogram("padlock.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a lock was held until its release."), metric.WithExplicitBucketBoundaries(holdBuckets...))
	check(err)
	o.held, err = m.Int64UpDownCounter("padlock.locks.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held right now."))
	check(err)
	o.losses, err = m.Int64Counter("padlock.lock.losses", metric.WithUnit("{lock}"),
		metric.WithDescription("Held locks lost, by cause."))
	check(err)
	o.renewLag, err = m.Float64Histogram("padlock.lease.renewal.lag", metric.WithUnit("s"),
		metric.WithDescription("Time from a renewal's scheduled moment to its confirmation."), metric.WithExplicitBucketBoundaries(waitBuckets...))
	check(err)
	o.renewFail, err = m.Int64Counter("padlock.lease.renewal.failures", metric.WithUnit("{renewal}"),
		metric.WithDescription("Renewals that got no answer (tried again until the lease's trust runs out)."))
	check(err)
	o.polling, err = m.Int64Counter("padlock.notices.unavailable", metric.WithUnit("{acquire}"),
		metric.WithDescription("Waiting Acquire calls that poll for want of release notices."))
	check(err)
	o.votes, err = m.Int64Counter("padlock.redlock.votes", metric.WithUnit("{vote}"),
		metric.WithDescription("Redlock node votes, by request and node outcome."))
	check(err)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return o, nil
}

// attrs returns the attribute options of key's namespace.
func (o *Observer) attrs(key string) *nsAttrs {
	name := o.namespace(key)
	if m := o.ns.Load(); m != nil {
		if a := (*m)[name]; a != nil {
			return a
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := map[string]*nsAttrs{}
	if m := o.ns.Load(); m != nil {
		old = *m
	}
	if a := old[name]; a != nil {
		return a
	}
	if len(old) >= o.maxNS {
		name = OtherNamespace
		if a := old[name]; a != nil {
			return a
		}
	}
	a := newNSAttrs(name)
	m := make(map[string]*nsAttrs, len(old)+1)
	maps.Copy(m, old)
	m[name] = a
	o.ns.Store(&m)
	return a
}

func newNSAttrs(name string) *nsAttrs {
	ns := AttrNamespace.String(name)
	pair := func(kv ...attribute.KeyValue) ([]metric.AddOption, []metric.RecordOption) {
		opt := metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{ns}, kv...)...))
		return []metric.AddOption{opt}, []metric.RecordOption{opt}
	}
	a := &nsAttrs{}
	a.add, a.record = pair()
	for i := range a.outcome {
		oc := AttrOutcome.String(padlock.AcquireOutcome(i).String())
		a.outcome[i].add, a.outcome[i].record = pair(oc)
		a.spanEnd[i] = []attribute.KeyValue{ns, oc}
	}
	_, a.handed[0] = pair(AttrHandedOn.Bool(false))
	_, a.handed[1] = pair(AttrHandedOn.Bool(true))
	for i := range a.lost {
		a.lost[i], _ = pair(AttrLostCause.String(padlock.LostCause(i).String()))
	}
	return a
}

// AcquireStart starts the Acquire's span.
func (o *Observer) AcquireStart(ctx context.Context, e padlock.AcquireStartEvent) context.Context {
	ctx, span := o.tracer.Start(ctx, "padlock.acquire", spanStart...)
	if o.keysInSpans && span.IsRecording() {
		span.SetAttributes(AttrKey.String(e.Key))
	}
	return ctx
}

// AcquireWait counts the Acquire as waiting, and adds a span event.
func (o *Observer) AcquireWait(ctx context.Context, e padlock.AcquireWaitEvent) {
	o.waiting.Add(ctx, 1, o.attrs(e.Key).add...)
	trace.SpanFromContext(ctx).AddEvent("padlock.wait")
}

// AcquireAttempt adds a span event.
func (o *Observer) AcquireAttempt(ctx context.Context, e padlock.AcquireAttemptEvent) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if e.Err != nil {
		span.AddEvent("padlock.attempt_failed", trace.WithAttributes(AttrAttempt.Int(e.Attempt), attribute.String("error.message", o.errText(e.Err, e.Key))))
		return
	}
	span.AddEvent("padlock.busy", trace.WithAttributes(AttrAttempt.Int(e.Attempt), AttrHolderTTL.Int64(e.HolderTTL.Milliseconds())))
}

// AcquireEnd records the outcome and ends the span.
func (o *Observer) AcquireEnd(ctx context.Context, e padlock.AcquireEndEvent) {
	a := o.attrs(e.Key)
	i := 0
	if int(e.Outcome) < len(a.outcome) {
		i = int(e.Outcome)
	}
	o.acquireDur.Record(ctx, e.Wait.Seconds(), a.outcome[i].record...)
	o.outcomes.Add(ctx, 1, a.outcome[i].add...)
	if e.Waited {
		o.waiting.Add(ctx, -1, a.add...)
	}
	if e.Outcome.Held() {
		o.held.Add(ctx, 1, a.add...)
	}
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		// Namespace and outcome from a slice built once; the attempts
		// only when they say more than an uncontended Acquire's one.
		span.SetAttributes(a.spanEnd[i]...)
		if e.Attempts != 1 {
			span.SetAttributes(AttrAttempts.Int(e.Attempts))
		}
		switch e.Outcome {
		case padlock.OutcomeHandedOff:
			span.AddEvent("padlock.handoff")
		case padlock.OutcomeUnavailable, padlock.OutcomeClosed, padlock.OutcomeInvalid:
			span.RecordError(o.spanErr(e.Err, e.Key))
			span.SetStatus(codes.Error, o.errText(e.Err, e.Key))
		}
	}
	span.End()
}

// LockReleased records the hold time.
func (o *Observer) LockReleased(e padlock.LockReleasedEvent) {
	a := o.attrs(e.Key)
	ctx := context.Background()
	h := 0
	if e.HandedOn {
		h = 1
	}
	o.holdDur.Record(ctx, e.Held.Seconds(), a.handed[h]...)
	o.held.Add(ctx, -1, a.add...)
}

// LeaseRenewed records the renewal's lag, or counts its failure.
func (o *Observer) LeaseRenewed(e padlock.LeaseRenewedEvent) {
	a := o.attrs(e.Key)
	ctx := context.Background()
	if !e.OK {
		o.renewFail.Add(ctx, 1, a.add...)
		return
	}
	o.renewLag.Record(ctx, max(e.Lag, 0).Seconds(), a.record...)
}

// LockLost counts the loss by cause.
func (o *Observer) LockLost(e padlock.LockLostEvent) {
	a := o.attrs(e.Key)
	ctx := context.Background()
	c := 0
	if int(e.Cause) < len(a.lost) {
		c = int(e.Cause)
	}
	o.losses.Add(ctx, 1, a.lost[c]...)
	o.held.Add(ctx, -1, a.add...)
}

// NoticesUnavailable counts a waiter that polls.
func (o *Observer) NoticesUnavailable(e padlock.NoticesUnavailableEvent) {
	o.polling.Add(context.Background(), 1, o.attrs(e.Key).add...)
}

// QuorumVoted counts each node's vote.
func (o *Observer) QuorumVoted(e padlock.QuorumVotedEvent) {
	ctx := context.Background()
	for _, n := range e.Nodes {
		o.votes.Add(ctx, 1, metric.WithAttributes(AttrRedlockOp.String(e.Op), AttrRedlockNode.String(n.Addr), AttrNodeOutcome.String(n.Outcome.String())))
	}
}

// errText is err's text for a span: where it names key, the key's
// namespace and "…" stand in its place, unless WithKeysInSpans.
func (o *Observer) errText(err error, key string) string {
	if err == nil {
		return ""
	}
	if o.keysInSpans {
		return err.Error()
	}
	return keyattr.Scrub(err.Error(), key, keyattr.Namespace(key)+":…")
}

// spanErr is err as a span records it: err itself, unless its text names
// key without WithKeysInSpans; then an error of the same text as errText
// that still unwraps to err.
func (o *Observer) spanErr(err error, key string) error {
	if err == nil || o.keysInSpans || key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return &redactedError{msg: o.errText(err, key), err: err}
}

// redactedError is an error whose text no longer names a key.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

var _ padlock.Observer = (*Observer)(nil)
