// Command example-app is a small order/payment service that shows padlock
// in use: a Gin middleware locking each order while it is paid, a decorated
// job that runs once at a time, fencing tokens enforced by the database, and
// a view of the locks held. Run it with no configuration:
//
//	go run ./example-app
//
// and it starts an embedded Redis (miniredis, in-process, on loopback,
// behind a random password only the process knows) and a SQLite database
// in a temp file. Every route that acts needs an API key (API_KEYS;
// without it, two demo keys are printed at start), and an order is its
// creator's: another caller's GET or pay of it is 404, as for an order
// that does not exist, and takes no lock. The public /healthz says ok,
// degraded or down and nothing more; the admin listener's /healthz says
// what is down and where. See usage in config.go for the environment it
// reads: REDIS_ADDR switches to real Redis servers, each given as
// host:port or as a redis:// URL (rediss:// for TLS) with the user and
// password the server requires. The admin side serves Prometheus metrics
// at /metrics in a build with the prometheus tag (go run -tags prometheus
// ./example-app); the default build leaves the OpenTelemetry SDK and the
// Prometheus client out, so that the first run compiles less.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
)

func main() {
	flag.Usage = func() { fmt.Fprint(flag.CommandLine.Output(), usage) }
	flag.Parse()

	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "example-app: %v\n\n%s", err, usage)
		os.Exit(2)
	}
	logger := newLogger(os.Stderr, cfg.LogFormat)
	// Libraries that log on their own go to the app's log too: go-redis
	// through its logger, anything using the log package through slog's
	// default.
	redis.SetLogger(redisLogger{logger})
	slog.SetDefault(logger)
	gin.SetMode(gin.ReleaseMode)

	// The first SIGINT or SIGTERM starts the graceful shutdown; a second
	// one ends the process at once instead of waiting out the grace
	// period. Handled here rather than left to the signal's default
	// action, which is to be ignored when the app was started as a
	// shell's background job.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, logger) }()
	for n := 0; ; n++ {
		select {
		case err := <-done:
			if err != nil {
				logger.Error("exiting", "err", err)
				os.Exit(1)
			}
			return
		case sig := <-sigs:
			if n == 0 {
				cancel()
				continue
			}
			logger.Warn("second signal: exiting at once, without waiting for the requests in flight", "signal", sig.String())
			code := 1
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s) // as a shell reports a process ended by s
			}
			os.Exit(code)
		}
	}
}
