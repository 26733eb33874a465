package httplock_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

// With both permits of a merchant taken, Limit refuses with the status
// the app picked, Retry-After and the key's namespace (the key itself
// only with WithEchoKey, as Lock's busy answers); once one is given back
// the handler runs under a permit.
func TestLimit(t *testing.T) {
	l, _, _ := newLocker(t)
	sem, err := l.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	mw := httplock.Limit(sem, httplock.PathValue("id", lockkey.Int(64)), http.StatusTooManyRequests)
	var fence int64
	mux := http.NewServeMux()
	mux.Handle("POST /merchants/{id}/pay", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fence = padlock.FromContext(r.Context()).Fence()
		w.WriteHeader(http.StatusNoContent)
	})))
	ctx := context.Background()
	const key = "POST /merchants/<id>/pay:5"
	var held []*padlock.Lock
	for range 2 {
		lk, err := sem.Acquire(ctx, key, padlock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lk)
	}
	w := serve(mux, "POST", "/merchants/5/pay", "")
	p := checkProblem(t, w, http.StatusTooManyRequests)
	if w.Header().Get("Retry-After") != "1" || p.Key != "" || p.Namespace != "POST /merchants/<id>/pay" {
		t.Fatalf("got Retry-After %q, key %q, namespace %q, want 1, no key and the namespace", w.Header().Get("Retry-After"), p.Key, p.Namespace)
	}
	echo := http.NewServeMux()
	echo.Handle("POST /merchants/{id}/pay", httplock.Limit(sem, httplock.PathValue("id", lockkey.Int(64)), http.StatusTooManyRequests, httplock.WithEchoKey())(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	if p := checkProblem(t, serve(echo, "POST", "/merchants/5/pay", ""), http.StatusTooManyRequests); p.Key != key {
		t.Fatalf("WithEchoKey: got key %q, want %q", p.Key, key)
	}
	held[0].Release(ctx)
	defer held[1].Release(ctx)
	if w := serve(mux, "POST", "/merchants/5/pay", ""); w.Code != http.StatusNoContent || fence <= held[1].Fence() {
		t.Fatalf("got status %d, fence %d, want 204 and a fence above %d", w.Code, fence, held[1].Fence())
	}
}
