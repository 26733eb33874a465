package httplock_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/lockkey"
)

// KeyFor asks the router: on every kind of route it returns the key the
// middleware locks when the request is served (what the handler's lock
// reports), or says why there is none, and never runs a handler behind a
// lock nor takes a lock.
func TestKeyFor(t *testing.T) {
	l, _, rdb := newLocker(t)
	sem, err := l.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	var (
		ran  atomic.Int32 // handler runs
		seen atomic.Value // the key of the lock the last handler held
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		if lk := padlock.FromContext(r.Context()); lk != nil {
			seen.Store(lk.Key())
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer ok" {
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	caller := func(*http.Request) (string, error) { return "alice", nil }
	idem := idempotency.New(l, rdb, caller)

	mux := http.NewServeMux()
	id := httplock.PathValue("id", lockkey.Int(64))
	mux.Handle("POST /orders/{id}/pay", auth(idem(httplock.Lock(l, id)(handler))))
	mux.Handle("POST /merchants/{id}/charge", httplock.Limit(sem, id, http.StatusTooManyRequests)(handler))
	mux.Handle("POST /carts", httplock.Lock(l, httplock.JSON("cart", lockkey.Text()), httplock.WithNamespace("cart"))(handler))
	mux.Handle("GET /orders/{id}", handler)
	mux.Handle("POST /orders/{id}/refund", httplock.Lock(l, id,
		httplock.WithSkip(func(r *http.Request) bool { return r.Header.Get("X-Dry-Run") != "" }))(handler))
	// chi sets the pattern, without a method, for a middleware on the
	// route (With).
	chiRouter := chi.NewRouter()
	chiRouter.With(httplock.Lock(l, id)).Post("/accounts/{id}/withdraw", handler)
	// gorilla/mux sets none, nor does chi before routing (Use): the
	// namespace is the app's.
	noPattern := httplock.Lock(l, httplock.Query("account", lockkey.Int(64)), httplock.WithNamespace("withdraw"))(handler)

	tests := []struct {
		name    string
		h       http.Handler
		method  string
		target  string
		body    string
		header  map[string]string
		want    string
		wantErr error
		served  bool // a request served as it is holds the lock: check its key
	}{
		{name: "ServeMux", h: mux, method: "POST", target: "/orders/042/pay",
			header: map[string]string{"Authorization": "Bearer ok", "Idempotency-Key": "k1"},
			want:   "POST /orders/<id>/pay:42", served: true},
		{name: "Limit", h: mux, method: "POST", target: "/merchants/7/charge", want: "POST /merchants/<id>/charge:7", served: true},
		{name: "JSON body and namespace", h: mux, method: "POST", target: "/carts", body: `{"cart":"c:1"}`, want: "cart:c%3A1", served: true},
		{name: "chi", h: chiRouter, method: "POST", target: "/accounts/7/withdraw", want: "/accounts/<id>/withdraw:7", served: true},
		{name: "no pattern", h: noPattern, method: "POST", target: "/accounts/9/withdraw?account=9", want: "withdraw:9", served: true},
		{name: "no lock on the route", h: mux, method: "GET", target: "/orders/1", wantErr: httplock.ErrNoLock},
		{name: "no route", h: mux, method: "GET", target: "/nowhere", wantErr: httplock.ErrNoLock},
		{name: "refused before the lock", h: mux, method: "POST", target: "/orders/1/pay", wantErr: httplock.ErrNoLock},
		{name: "skipped", h: mux, method: "POST", target: "/orders/1/refund", header: map[string]string{"X-Dry-Run": "1"}, wantErr: httplock.ErrNoLock},
		{name: "bad key part", h: mux, method: "POST", target: "/orders/abc/pay",
			header: map[string]string{"Authorization": "Bearer ok", "Idempotency-Key": "k2"}, wantErr: lockkey.ErrInvalidPart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(tt.method, tt.target, tt.body)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if err := rdb.FlushDB(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			before := ran.Load()
			got, err := httplock.KeyFor(tt.h, req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("KeyFor = %q, %v; want an error matching %v", got, err, tt.wantErr)
				}
				if tt.name == "skipped" && ran.Load() != before {
					t.Errorf("KeyFor ran the handler of a skipped request")
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("KeyFor = %q, %v; want %q", got, err, tt.want)
			}
			if ran.Load() != before {
				t.Errorf("KeyFor ran the handler behind the lock")
			}
			if held := l.Held(); len(held) != 0 {
				t.Errorf("KeyFor left locks held: %v", held)
			}
			if n := rdb.DBSize(context.Background()).Val(); n != 0 {
				t.Errorf("KeyFor wrote %d keys to Redis, want none", n)
			}
			if !tt.served {
				return
			}
			// The same request, served: its body was put back, and the
			// lock it holds has the key KeyFor gave.
			w := serveRequest(tt.h, req)
			if w.Code != http.StatusNoContent {
				t.Fatalf("serving the request after KeyFor: got %d (%s), want 204", w.Code, w.Body)
			}
			if k, _ := seen.Load().(string); k != got {
				t.Errorf("the handler held %q, KeyFor said %q", k, got)
			}
		})
	}

	// The error says what answered.
	_, err = httplock.KeyFor(mux, newRequest("POST", "/orders/1/pay", ""))
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("KeyFor of an unauthenticated request: got %v, want ErrNoLock naming 401", err)
	}
}
