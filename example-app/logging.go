package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

func newLogger(w io.Writer, format string) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// redisLogger puts go-redis's own log lines (failed dials, broken pub/sub
// connections: what an outage looks like from inside the client) into the
// app's log, as warnings with source=go-redis, so a JSON log stays JSON
// when it matters most. go-redis would print them to stderr in its own
// format otherwise.
type redisLogger struct{ l *slog.Logger }

// Printf logs one go-redis line.
func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	r.l.Log(ctx, slog.LevelWarn, msg, "source", "go-redis")
}
