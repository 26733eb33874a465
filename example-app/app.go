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
	obs, err := newObservability(logger)
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
	a.server = newServer(cfg, logger, st, b)
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

// run serves the app on cfg.Addr until ctx ends, then shuts down
// gracefully: it stops accepting, gives requests in flight up to
// cfg.shutdownTimeout, cancels those still running, waits for them, and
// closes everything.
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
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           a.server,
		ReadHeaderTimeout: 5 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
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
	logger.Info("shutting down", "grace", cfg.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("shutdown: requests still running after the grace period; cancelling them")
		err = nil
	}
	cancelRequests()
	_ = srv.Close()
	<-served
	a.server.inflight.Wait()
	logger.Info("stopped")
	return err
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
