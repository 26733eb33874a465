//go:build !prometheus

package main

import (
	"net/http"

	"github.com/padlockgo/padlock"
)

// metricsBuilt says whether this build serves /metrics.
const metricsBuilt = false

// metrics stands for the Prometheus metrics in a build without the
// prometheus tag: no observer, and /metrics answers 404 saying how to get
// them. The tag keeps the OpenTelemetry SDK, its Prometheus exporter and
// the Prometheus client out of the default build, where they would make
// up a large part of the first `go run ./example-app`.
type metrics struct{}

func newMetrics() (*metrics, error) { return &metrics{}, nil }

func (*metrics) observer() padlock.Observer { return nil }

func (*metrics) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "metrics are not built in: run the app built with -tags prometheus "+
			"(go run -tags prometheus ./example-app)", http.StatusNotFound)
	})
}

func (*metrics) close() {}
