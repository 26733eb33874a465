// Package padlockslog logs a padlock Locker's trouble through log/slog: a
// padlock.Observer that writes lost locks and failed renewals at Warn, and
// waiters that fall back to polling (no release notices) at Info, each
// with the lock's key, redacted, and the cause.
//
//	l, err := padlock.New(rdb, padlock.WithObserver(padlockslog.New(slog.Default())))
//
// A key is logged as its namespace (attribute namespace) and a short keyed
// hash (attribute key_hash), as the lock page shows it, never as it is: a
// key is built from request data (a client's Idempotency-Key, a token
// from a header), and logs travel further than the service. WithRedactor
// shares the lock page's secret and readable namespaces; WithRawKeys logs
// keys as they are, for keys that hold nothing secret.
//
// Everything that goes well (acquisitions, releases, renewals) is left to
// metrics (package padlockotel): a log line per lock would cost more than
// the lock.
package padlockslog

import (
	"context"
	"log/slog"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/keyattr"
	"github.com/padlockgo/padlock/lockkey"
)

// Observer is the padlock.Observer New returns.
type Observer struct {
	padlock.NopObserver
	logger   *slog.Logger
	raw      bool
	redactor *lockkey.Redactor // nil: the process's
}

// An Option configures New.
type Option func(*Observer)

// WithRawKeys logs each key as it is (attribute key), and errors that
// name it as they are, instead of its namespace and keyed hash. Only for
// keys that whoever reads the logs may see: none built from a client's
// data. Default: off, keys are redacted.
func WithRawKeys() Option { return func(o *Observer) { o.raw = true } }

// WithRedactor redacts keys with r: its secret keys the hashes, and the
// keys of its readable namespaces are logged as they are too (attribute
// key). Share r with the lock page (lockview.Config.Redactor) so that a
// key has one hash in both, and give every instance the same secret
// (lockkey.WithRedactSecret) to compare hashes across them. A nil r is
// the process's Redactor. Default: the process's Redactor, with a random
// secret and no readable namespace (lockkey.Redactor).
func WithRedactor(r *lockkey.Redactor) Option {
	return func(o *Observer) { o.redactor = r }
}

// New returns an Observer that logs to logger (slog.Default() when nil),
// keys redacted unless WithRawKeys.
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

// key returns the attributes that show k.
func (o *Observer) key(k string) slog.Attr {
	if o.raw {
		return slog.String("key", k)
	}
	r := o.redactor.Redact(k)
	if r.Key != "" {
		return slog.Group("", slog.String("key", r.Key), slog.String("key_hash", r.Hash), slog.String("namespace", r.Namespace))
	}
	return slog.Group("", slog.String("key_hash", r.Hash), slog.String("namespace", r.Namespace))
}

// err returns err's attribute, with k in its text shown as key shows it.
func (o *Observer) err(err error, k string) slog.Attr {
	if err == nil || o.raw {
		return slog.Any("err", err)
	}
	r := o.redactor.Redact(k)
	if r.Key != "" {
		return slog.Any("err", err)
	}
	return slog.String("err", keyattr.Scrub(err.Error(), k, r.Namespace+lockkey.Sep+"…#"+r.Hash))
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
		o.key(e.Key), o.err(e.Err, e.Key), slog.Duration("lag", e.Lag))
}

// NoticesUnavailable logs at Info.
func (o *Observer) NoticesUnavailable(e padlock.NoticesUnavailableEvent) {
	o.logger.LogAttrs(context.Background(), slog.LevelInfo, "padlock: no release notices, waiter polls",
		o.key(e.Key), o.err(e.Err, e.Key))
}
