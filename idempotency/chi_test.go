package idempotency_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/padlockgo/padlock/idempotency"
)

// chi without WithNamespace: mounted on a route (With), keys are scoped by
// chi's route pattern; mounted on the router (Use), before chi matched the
// route, by the method and path. Either way the same key on two routes is
// two keys, each run once, never a 422 for a request on another route.
func TestNewChiNamespace(t *testing.T) {
	tests := []struct {
		name    string
		mount   func(r chi.Router, idem func(http.Handler) http.Handler, h http.HandlerFunc)
		wantKey string // the record of POST /orders/7/pay with key k1
	}{
		{"With", func(r chi.Router, idem func(http.Handler) http.Handler, h http.HandlerFunc) {
			r.With(idem).Post("/orders/{id}/pay", h)
			r.With(idem).Post("/orders/{id}/refund", h)
		}, "padlock:idempotency:/orders/<id>/pay:tester:k1"},
		{"Use", func(r chi.Router, idem func(http.Handler) http.Handler, h http.HandlerFunc) {
			r.Use(idem)
			r.Post("/orders/{id}/pay", h)
			r.Post("/orders/{id}/refund", h)
		}, "padlock:idempotency:POST /orders/7/pay:tester:k1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, srv, rdb := newLocker(t)
			var runs atomic.Int64
			r := chi.NewRouter()
			tt.mount(r, idempotency.New(l, rdb, tester), func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%s run %d", r.URL.Path, runs.Add(1))
			})
			pay := send(r, "POST", "/orders/7/pay", "{}", "k1")
			refund := send(r, "POST", "/orders/7/refund", "{}", "k1")
			if pay.Body.String() != "/orders/7/pay run 1" || refund.Body.String() != "/orders/7/refund run 2" {
				t.Fatalf("got pay %d %q, refund %d %q, want runs 1 and 2", pay.Code, pay.Body, refund.Code, refund.Body)
			}
			checkReplay(t, send(r, "POST", "/orders/7/pay", "{}", "k1"), pay)
			checkReplay(t, send(r, "POST", "/orders/7/refund", "{}", "k1"), refund)
			if n, err := rdb.Exists(context.Background(), tt.wantKey).Result(); n != 1 || err != nil {
				t.Fatalf("got %d, %v for %q (keys %v), want the record there", n, err, tt.wantKey, srv.Keys(t))
			}
		})
	}
}
