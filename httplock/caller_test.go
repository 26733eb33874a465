package httplock_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/internal/handlertest"
	"github.com/padlockgo/padlock/lockkey"
)

// heldBy serves req to the handler mw wraps, and returns what the lock
// (or permit) the handler holds says of its holder, as Held reads it and
// as another acquire refused meanwhile does (Holder); and for a lock, as
// Inspect reads it (Inspect lists no permits).
func heldBy(t *testing.T, l *padlock.Locker, mw func(http.Handler) http.Handler, req *http.Request,
	acquire func(ctx context.Context, key string, o padlock.Options) (*padlock.Lock, error)) (held, inRedis, refused string) {
	t.Helper()
	ctx := context.Background()
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := padlock.FromContext(r.Context()).Key()
		for _, x := range l.Held() {
			if x.Key == key {
				held = x.Owner
			}
		}
		if in, err := l.Inspect(ctx, 0); err == nil && len(in.Locks) == 1 {
			inRedis = in.Locks[0].Owner
		}
		_, err := acquire(ctx, key, padlock.Options{})
		var na *padlock.NotAcquiredError
		if !errors.As(err, &na) {
			t.Errorf("acquire of the held key: got %v, want ErrNotAcquired", err)
		} else {
			refused = na.Holder
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", mw(inner))
	if w := serveRequest(mux, req); w.Code != http.StatusNoContent {
		t.Fatalf("got status %d (%s), want 204", w.Code, w.Body)
	}
	return held, inRedis, refused
}

// TestLockNamesCaller checks who a request's lock names as its holder:
// the Locker's Owner, the route template, and WithCaller's identity as a
// keyed hash, never as it is, for Lock and Limit alike; the app's own
// Options.Caller wins.
func TestLockNamesCaller(t *testing.T) {
	l, sem, redactor, _ := handlertest.NamedLocker(t)
	const secret = "sk_live_4242424242424242"
	key := httplock.PathValue("id", lockkey.Int(64))
	route := handlertest.Owner + " route=POST /orders/<id>/pay"
	for _, tc := range []struct {
		name string
		mw   func(http.Handler) http.Handler
		want string
		sem  bool
	}{
		{"Lock, no caller", httplock.Lock(l, key), route, false},
		{"Lock", httplock.Lock(l, key, httplock.WithCaller(handlertest.Bearer)), route + " caller=#" + processHash(secret), false},
		{"Lock with a Redactor", httplock.Lock(l, key, httplock.WithCaller(handlertest.Bearer), httplock.WithRedactor(redactor)),
			route + " caller=#" + redactor.Hash(secret), false},
		{"Lock, the app's Caller", httplock.Lock(l, key, httplock.WithCaller(handlertest.Bearer),
			httplock.WithLockOptions(padlock.Options{Caller: "batch=7"})), handlertest.Owner + " batch=7", false},
		{"Limit", httplock.Limit(sem, key, http.StatusTooManyRequests, httplock.WithCaller(handlertest.Bearer), httplock.WithRedactor(redactor)),
			route + " caller=#" + redactor.Hash(secret), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest("POST", "/orders/42/pay", "")
			req.Header.Set("Authorization", "Bearer "+secret)
			acquire, inspected := l.Acquire, tc.want
			if tc.sem {
				acquire, inspected = sem.Acquire, ""
			}
			held, inRedis, refused := heldBy(t, l, tc.mw, req, acquire)
			if held != tc.want || inRedis != inspected || refused != tc.want {
				t.Errorf("holder: got Held %q, Inspect %q, refused acquire's Holder %q; want %q", held, inRedis, refused, tc.want)
			}
			for _, s := range []string{held, inRedis, refused} {
				if strings.Contains(s, secret) || strings.Contains(s, "4242") {
					t.Errorf("holder %q shows the caller's secret", s)
				}
			}
		})
	}
}

// TestGuardCaller checks the Caller a Guard builds for adapters: both
// parts, either, or none, always within padlock.MaxOwnerLen.
func TestGuardCaller(t *testing.T) {
	l, _, _ := newLocker(t)
	g := httplock.NewGuard(l, httplock.WithCaller(handlertest.Bearer))
	req := newRequest("POST", "/", "")
	req.Header.Set("Authorization", "Bearer alice")
	anon := newRequest("POST", "/", "")
	long := "/merchants/:merchant/orders/:order/refunds/:refund/lines/:line"
	h := "caller=#" + processHash("alice")
	for _, tc := range []struct {
		r           *http.Request
		route, want string
	}{
		{req, "/orders/:id/pay", "route=/orders/$id/pay " + h},
		{anon, "/orders/:id/pay", "route=/orders/$id/pay"},
		{req, "", h},
		{anon, "", ""},
		{req, long, "route=/merchants/$me..s/$refund/lines/$line " + h},
	} {
		got := g.Caller(tc.r.Context(), tc.r, tc.route)
		if got != tc.want {
			t.Errorf("Caller(%q): got %q, want %q", tc.route, got, tc.want)
		}
		if err := (padlock.Options{Caller: got}).Validate(); err != nil || len(got) > padlock.MaxOwnerLen {
			t.Errorf("Caller(%q) = %q (%d bytes): want a valid Options.Caller: %v", tc.route, got, len(got), err)
		}
	}
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "WithCaller") {
			t.Errorf("WithCaller(nil): got panic %v, want one naming it", v)
		}
	}()
	httplock.NewGuard(l, httplock.WithCaller(nil))
}

// processHash is the hash of s under the process's secret, the default.
func processHash(s string) string { return (*lockkey.Redactor)(nil).Hash(s) }
