package padlockslog_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/padlockslog"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// recording is a slog.Handler that keeps every record, its attributes
// flattened to "name=value".
type recording struct {
	mu      sync.Mutex
	records []string
}

func (h *recording) Enabled(context.Context, slog.Level) bool { return true }
func (h *recording) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recording) WithGroup(string) slog.Handler            { return h }
func (h *recording) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	var add func(a slog.Attr)
	add = func(a slog.Attr) {
		if a.Value.Kind() == slog.KindGroup {
			for _, g := range a.Value.Group() {
				add(g)
			}
			return
		}
		line += " " + a.Key + "=" + a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { add(a); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, line)
	return nil
}

func (h *recording) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.records...)
}

func TestEvents(t *testing.T) {
	raw := []padlockslog.Option{padlockslog.WithRawKeys()}
	for _, tc := range []struct {
		name   string
		opts   []padlockslog.Option
		emit   func(o *padlockslog.Observer)
		want   string // the record, or "" for none
		absent string // must not appear
	}{
		{"lost", raw, func(o *padlockslog.Observer) {
			o.LockLost(padlock.LockLostEvent{Key: "order:42", Cause: padlock.LostTokenGone, Held: time.Second, Fence: 7})
		}, "WARN padlock: lock lost key=order:42 cause=token_gone held=1s fence=7", ""},
		{"renewal failed", raw, func(o *padlockslog.Observer) {
			o.LeaseRenewed(padlock.LeaseRenewedEvent{Key: "order:42", Err: errors.New("i/o timeout"), Lag: time.Second})
		}, "WARN padlock: renewal failed key=order:42 err=i/o timeout lag=1s", ""},
		{"renewal ok", raw, func(o *padlockslog.Observer) {
			o.LeaseRenewed(padlock.LeaseRenewedEvent{Key: "order:42", OK: true})
		}, "", ""},
		{"polling", raw, func(o *padlockslog.Observer) {
			o.NoticesUnavailable(padlock.NoticesUnavailableEvent{Key: "order:42", Err: errors.New("refused")})
		}, "INFO padlock: no release notices, waiter polls key=order:42 err=refused", ""},
		{"hashed", nil, func(o *padlockslog.Observer) {
			o.LockLost(padlock.LockLostEvent{Key: "idempotency:alice:secret-key", Cause: padlock.LostExpired})
		}, "WARN padlock: lock lost key_hash=", "secret-key"},
		// A plain SHA-256 of a likely key would give it away.
		{"hashed, keyed", nil, func(o *padlockslog.Observer) {
			o.LockLost(padlock.LockLostEvent{Key: "order:1", Cause: padlock.LostExpired})
		}, "WARN padlock: lock lost key_hash=", "key_hash=" + plainHash("order:1")},
		// An error that names the key shows the redacted key in its place.
		{"hashed error", nil, func(o *padlockslog.Observer) {
			o.LeaseRenewed(padlock.LeaseRenewedEvent{Key: "idempotency:alice:secret-key", Err: errors.New(`renewing "idempotency:alice:secret-key": i/o timeout`)})
		}, "WARN padlock: renewal failed key_hash=", "secret-key"},
		{"hashed polling", nil, func(o *padlockslog.Observer) {
			o.NoticesUnavailable(padlock.NoticesUnavailableEvent{Key: "idempotency:alice:secret-key", Err: errors.New("no notices for idempotency:alice:secret-key")})
		}, "INFO padlock: no release notices, waiter polls key_hash=", "secret-key"},
		{"redactor, readable namespace", []padlockslog.Option{padlockslog.WithRedactor(readableJobs(t))}, func(o *padlockslog.Observer) {
			o.LockLost(padlock.LockLostEvent{Key: "job:nightly-report", Cause: padlock.LostExpired})
		}, "WARN padlock: lock lost key=job:nightly-report key_hash=" + readableJobs(t).Hash("job:nightly-report") + " namespace=job", ""},
		{"redactor, other namespace", []padlockslog.Option{padlockslog.WithRedactor(readableJobs(t))}, func(o *padlockslog.Observer) {
			o.LockLost(padlock.LockLostEvent{Key: "order:1", Cause: padlock.LostExpired})
		}, "WARN padlock: lock lost key_hash=" + readableJobs(t).Hash("order:1") + " namespace=order", "key=order:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recording{}
			tc.emit(padlockslog.New(slog.New(h), tc.opts...))
			got := h.lines()
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("got %q, want no record", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("got %q, want one record starting %q", got, tc.want)
			case tc.absent != "" && strings.Contains(strings.Join(got, "\n"), tc.absent):
				t.Errorf("got %q, want no %q in it", got, tc.absent)
			}
			if tc.name == "hashed" && len(got) == 1 && !strings.Contains(got[0], "namespace=idempotency") {
				t.Errorf("got %q, want namespace=idempotency", got[0])
			}
		})
	}
}

// TestPausedRedis logs what a Locker goes through when its Redis stops
// answering: failed renewals, then the lost lock, at Warn. By default a
// key is logged as its namespace and keyed hash, never as it is: an
// in-flight idempotency lock's key holds the client's Idempotency-Key.
// WithRawKeys logs it as it is.
func TestPausedRedis(t *testing.T) {
	const key = "idempotency:POST /orders:alice:8e03978e-7d1c-4b2a-9f3e-6a5b4c3d2e1f"
	for _, rawKeys := range []bool{false, true} {
		t.Run(fmt.Sprintf("WithRawKeys %v", rawKeys), func(t *testing.T) {
			srv := redistest.Start(t)
			h := &recording{}
			var opts []padlockslog.Option
			if rawKeys {
				opts = append(opts, padlockslog.WithRawKeys())
			}
			l, err := padlock.New(srv.Client(t), padlock.WithObserver(padlockslog.New(slog.New(h), opts...)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			ctx := context.Background()
			lk, err := l.Acquire(ctx, key, padlock.Options{TTL: 600 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			srv.Pause(t)
			select {
			case <-lk.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("lock not lost within 20s of pausing Redis")
			}
			deadline := time.Now().Add(20 * time.Second)
			for !strings.Contains(strings.Join(h.lines(), "\n"), "renewal failed") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			srv.Resume(t)
			_ = lk.Release(ctx)
			got := strings.Join(h.lines(), "\n")
			shown := "key_hash=" + (*lockkey.Redactor)(nil).Hash(key) + " namespace=idempotency"
			if rawKeys {
				shown = "key=" + key
			}
			for _, want := range []string{
				"WARN padlock: renewal failed " + shown + " err=",
				"WARN padlock: lock lost " + shown + " cause=lease_expired",
			} {
				if !strings.Contains(got, want) {
					t.Errorf("got records:\n%s\nwant one starting %q", got, want)
				}
			}
			if leaked := strings.Contains(got, "8e03978e"); leaked != rawKeys {
				t.Errorf("got the Idempotency-Key in the log %v, want %v:\n%s", leaked, rawKeys, got)
			}
		})
	}
}

// plainHash is how keys were hashed before: the first 12 hex digits of a
// plain SHA-256, which a dictionary of likely keys reverses.
func plainHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// readableJobs is a Redactor with a fixed secret that shows the "job"
// namespace's keys.
func readableJobs(t *testing.T) *lockkey.Redactor {
	t.Helper()
	r, err := lockkey.NewRedactor(lockkey.WithRedactSecret([]byte("a test's secret, 16+ bytes")), lockkey.WithReadableNamespaces("job"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
