package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/internal/handlertest"
)

// The in-flight lock names who holds it: the Locker's Owner, the route
// template and the caller as a keyed hash, never the caller's identity,
// the path or the Idempotency-Key; without a route, no route.
func TestInFlightLockNamesCaller(t *testing.T) {
	l, _, redactor, rdb := handlertest.NamedLocker(t)
	const secret = "sk_live_4242424242424242"
	caller := "caller=#" + redactor.Hash(secret)
	var held, refused string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := padlock.FromContext(r.Context()).Key()
		for _, x := range l.Held() {
			if x.Key == key {
				held = x.Owner
			}
		}
		_, err := l.Acquire(context.Background(), key, padlock.Options{}) // not r's: that holds the lock
		if na := (*padlock.NotAcquiredError)(nil); errors.As(err, &na) {
			refused = na.Holder
		}
		w.WriteHeader(http.StatusCreated)
	})
	idem := idempotency.New(l, rdb, userID, idempotency.WithRedactor(redactor))
	routed := http.NewServeMux()
	routed.Handle("POST /orders/{id}/pay", idem(handler))
	for _, tc := range []struct {
		name string
		h    http.Handler
		want string
	}{
		{"routed", authenticate(routed), handlertest.Owner + " route=POST /orders/<id>/pay " + caller},
		{"around the mux", authenticate(idem(handler)), handlertest.Owner + " " + caller},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, refused = "", ""
			w := send(tc.h, "POST", "/orders/7/pay", "{}", "key-4242-"+strings.ReplaceAll(tc.name, " ", "-"), "Authorization", "Bearer "+secret)
			if w.Code != http.StatusCreated {
				t.Fatalf("got %d %s, want 201", w.Code, w.Body)
			}
			if held != tc.want || refused != tc.want {
				t.Errorf("holder: got Held %q, refused acquire's Holder %q; want %q", held, refused, tc.want)
			}
			if strings.Contains(held, "4242") || strings.Contains(held, "/orders/7") {
				t.Errorf("holder %q shows request data", held)
			}
		})
	}
}
