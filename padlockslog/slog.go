// Package padlockslog logs a padlock Locker's trouble through log/slog: a
// padlock.Observer that writes lost locks and failed renewals at Warn, and
// waiters that fall back to polling (no release notices) at Info, each
// with the lock's key (or a keyed hash of it, see WithHashedKeys) and the cause.
//
//	l := padlock.New(rdb, padlock.WithObserver(padlockslog.New(slog.Default())))
//
// Everything that goes well (acquisitions, releases, renewals) is left to
// metrics (package padlockotel): a log line per lock would cost more than
// the lock.
package padlockslog

import (
	"context"
	"log/slog"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
)

// Observer is the padlock.Observer New returns.
type Observer struct {
	padlock.NopObserver
	logger   *slog.Logger
	hashed   bool
	redactor *lockkey.Redactor // nil: the process's
}

// An Option configures New.
type Option func(*Observer)

// WithHashedKeys logs a short keyed hash of each key (attribute key_hash)
// and its namespace, the part before the first ':' (attribute namespace),
// instead of the key itself: for keys built from data the log's readers
// must not see (client ids, idempotency keys). The hash is an HMAC under
// the process's random secret, so a reader cannot find a key by hashing
// guesses; it differs between processes and across restarts unless
// WithRedactor gives a secret. Default: the key is logged as is
// (attribute key).
func WithHashedKeys() Option { return func(o *Observer) { o.hashed = true } }

// WithRedactor is WithHashedKeys with r's secret and readable namespaces:
// keys of those namespaces are logged as they are too (attribute key).
// Share r with the lock page (lockview.Config.Redactor) so that a key has
// one hash in both. A nil r is the process's Redactor.
func WithRedactor(r *lockkey.Redactor) Option {
	return func(o *Observer) { o.hashed, o.redactor = true, r }
}

// New returns an Observer that logs to logger (slog.Default() when nil).
func New(logger *slog.Logger, opts ...Option) *Observer {
	if logger == nil {
		logger = slog.Default()
	}
	o := &Observer{logger: logger}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

func (o *Observer) key(k string) slog.Attr {
	if o.hashed {
		r := o.redactor.Redact(k)
		if r.Key != "" {
			return slog.Group("", slog.String("key", r.Key), slog.String("key_hash", r.Hash), slog.String("namespace", r.Namespace))
		}
		return slog.Group("", slog.String("key_hash", r.Hash), slog.String("namespace", r.Namespace))
	}
	return slog.String("key", k)
}

// LockLost logs at Warn.
func (o *Observer) LockLost(e padlock.LockLostEvent) {
	o.logger.LogAttrs(context.Background(), slog.LevelWarn, "padlock: lock lost",
		o.key(e.Key), slog.String("cause", e.Cause.String()), slog.Duration("held", e.Held), slog.Int64("fence", e.Fence))
}

// LeaseRenewed logs a failed renewal at Warn, and nothing else.
func (o *Observer) LeaseRenewed(e padlock.LeaseRenewedEvent) {
	if e.OK {
		return
	}
	o.logger.LogAttrs(context.Background(), slog.LevelWarn, "padlock: renewal failed",
		o.key(e.Key), slog.Any("err", e.Err), slog.Duration("lag", e.Lag))
}

// NoticesUnavailable logs at Info.
func (o *Observer) NoticesUnavailable(e padlock.NoticesUnavailableEvent) {
	o.logger.LogAttrs(context.Background(), slog.LevelInfo, "padlock: no release notices, waiter polls",
		o.key(e.Key), slog.Any("err", e.Err))
}
