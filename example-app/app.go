package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// app is the running service's parts, built by newApp and torn down by
// close.
type app struct {
	logger  *slog.Logger
	backend *backend
	store   *store
	server  *server
	obs     *observability
	admin   http.Handler // the admin side: lock page, /locks, /metrics
	tempDB  string       // the database file to remove at close, if a temp one
}

// newApp connects to Redis (or starts the embedded one) and opens the
// database. The caller must close the app.
func newApp(ctx context.Context, cfg config, logger *slog.Logger) (*app, error) {
	a := &app{logger: logger}
	path := cfg.DBPath
	if path == "" {
		dir, err := os.MkdirTemp("", "padlock-example-")
		if err != nil {
			return nil, err
		}
		a.tempDB = dir
		path = filepath.Join(dir, "orders.db")
	}
	obs, err := newObservability(logger, cfg.KeyRedactor)
	if err != nil {
		a.close()
		return nil, err
	}
	a.obs = obs
	b, err := connect(ctx, cfg, logger, obs.observer)
	if err != nil {
		a.close()
		return nil, err
	}
	a.backend = b
	st, err := openStore(ctx, path)
	if err != nil {
		a.close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	a.store = st
	logger.Info("database: sqlite", "path", path, "temporary", a.tempDB != "")
	if cfg.DemoKeys != nil {
		// Shown so that a first run works without configuration; real
		// keys (API_KEYS) are never logged.
		attrs := []any{}
		for caller, key := range cfg.DemoKeys {
			attrs = append(attrs, caller, key)
		}
		logger.Warn("API_KEYS is not set: demo API keys for this run; send one as Authorization: Bearer <key>", attrs...)
	}
	if a.server, err = newServer(cfg, logger, st, b); err != nil {
		a.close()
		return nil, err
	}
	if a.admin, err = a.server.adminHandler(obs); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

// close releases what newApp took, in reverse order. Locks still held are
// not released: they expire with their lease.
func (a *app) close() {
	if a.store != nil {
		if err := a.store.close(); err != nil {
			a.logger.Warn("closing database", "err", err)
		}
	}
	if a.backend != nil {
		a.backend.close()
	}
	if a.obs != nil {
		a.obs.close()
	}
	if a.tempDB != "" {
		_ = os.RemoveAll(a.tempDB)
	}
}

// errShutdown is the cause of a request context the server ended: the
// request was still running when the shutdown's grace period ran out.
var errShutdown = errors.New("the server is shutting down")

// run serves the app on cfg.Addr until ctx ends, then shuts down
// gracefully: it stops accepting, gives requests in flight up to
// cfg.shutdownTimeout, then cancels those still running (their context's
// cause is errShutdown, and they answer 503), gives them up to
// cfg.shutdownAnswer to send that answer, closes the connections, waits
// for the handlers to return, and closes everything.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	a, err := newApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	// Requests get a context of their own, cancelled only when shutdown
	// gives up waiting for them, not when the signal comes.
	base, cancelRequests := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelRequests(errShutdown)
	srv := newHTTPServer(cfg, a.server, logger)
	srv.BaseContext = func(net.Listener) context.Context { return base }
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/")
	stopAdmin, err := serveAdmin(cfg, a.admin, logger)
	if err != nil {
		_ = srv.Close()
		<-served
		return err
	}
	defer stopAdmin()

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: waiting for requests in flight; a second signal (Ctrl-C) exits at once", "grace", cfg.shutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("shutdown: the grace period ended with requests still running; the server ends them, answering 503", "grace", cfg.shutdownTimeout.String())
		err = nil
	}
	cancelRequests(errShutdown)
	// The handlers see their context end and answer 503. Shutdown again
	// waits until every connection is idle, that is until those answers
	// have been sent, not merely written by the handler (net/http flushes
	// after the handler returns); only then, or after shutdownAnswer, are
	// the connections closed.
	actx, cancelAnswer := context.WithTimeout(context.Background(), cfg.shutdownAnswer)
	defer cancelAnswer()
	if err := srv.Shutdown(actx); errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("shutdown: requests still running after they were ended; closing their connections", "waited", cfg.shutdownAnswer.String())
	}
	_ = srv.Close()
	<-served
	a.server.inflight.Wait()
	logger.Info("stopped")
	return err
}

// newHTTPServer returns the server for h, with the timeouts of cfg (see
// defaultConfig): a client that sends slowly, reads slowly or idles is cut
// off, so that it holds neither a connection nor, through a handler that
// waits on it, a lock for as long as it likes.
func newHTTPServer(cfg config, h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.readHeaderTimeout,
		ReadTimeout:       cfg.readTimeout,
		WriteTimeout:      cfg.writeTimeout,
		IdleTimeout:       cfg.idleTimeout,
		MaxHeaderBytes:    1 << 20, // beyond it net/http answers 431 itself; below, limitHeaders does
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// serveAdmin serves the admin side on cfg.AdminAddr, apart from the public
// listener, until the returned stop is called.
func serveAdmin(cfg config, h http.Handler, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return nil, fmt.Errorf("ADMIN_ADDR: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	logger.Info("admin listening", "addr", ln.Addr().String(), "locks", "http://"+ln.Addr().String()+"/debug/locks")
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}
