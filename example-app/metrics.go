//go:build prometheus

package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/padlockotel"
)

// metricsBuilt says whether this build serves /metrics.
const metricsBuilt = true

// metrics are the locks' OpenTelemetry metrics (padlockotel), exported for
// Prometheus on the admin listener's /metrics. They are built only with
// the prometheus tag (go run -tags prometheus ./example-app): the
// OpenTelemetry SDK, its Prometheus exporter and the Prometheus client
// would otherwise make up a large part of the app's first build.
type metrics struct {
	registry *prometheus.Registry
	meters   *sdkmetric.MeterProvider
	obs      padlock.Observer
}

func newMetrics() (*metrics, error) {
	m := &metrics{registry: prometheus.NewRegistry()}
	exp, err := otelprom.New(otelprom.WithRegisterer(m.registry))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	m.meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	if m.obs, err = padlockotel.New(padlockotel.WithMeterProvider(m.meters)); err != nil {
		_ = m.meters.Shutdown(context.Background())
		return nil, err
	}
	return m, nil
}

// observer is what records the metrics, for padlock.WithObserver.
func (m *metrics) observer() padlock.Observer { return m.obs }

// handler serves the metrics in Prometheus' text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

func (m *metrics) close() { _ = m.meters.Shutdown(context.Background()) }
