package httplock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

func TestLock(t *testing.T) {
	l, _, _ := newLocker(t)
	mw := httplock.Lock(l, httplock.Join(httplock.PathValue("id", lockkey.Int(64)), httplock.JSON("step", lockkey.Int(64))))
	var fence int64
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fence = padlock.FromContext(r.Context()).Fence()
		w.WriteHeader(http.StatusNoContent)
	})))

	if w := serve(mux, "POST", "/orders/1/pay", `{"step":2}`); w.Code != http.StatusNoContent || fence <= 0 {
		t.Fatalf("got status %d, fence %d, want 204 and a fence", w.Code, fence)
	}
	checkProblem(t, serve(mux, "POST", "/orders/1/pay", `{}`), http.StatusBadRequest)

	// The key is namespaced by the ServeMux pattern.
	lk, err := l.Acquire(context.Background(), "POST /orders/<id>/pay:1:2", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(context.Background())
	w := serve(mux, "POST", "/orders/1/pay", `{"step":2}`)
	p := checkProblem(t, w, http.StatusConflict)
	if w.Header().Get("Retry-After") == "" || p.Namespace != "POST /orders/<id>/pay" || p.Key != "" {
		t.Fatalf("got Retry-After %q, namespace %q, key %q, want a Retry-After, the namespace and no key", w.Header().Get("Retry-After"), p.Namespace, p.Key)
	}
}

func TestLockReleasedOnPanic(t *testing.T) {
	l, _, _ := newLocker(t)
	mw := httplock.Lock(l, httplock.Query("id", lockkey.Text()), httplock.WithNamespace("jobs"))
	boom := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	ok := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))

	func() {
		defer func() {
			if got := recover(); got != "boom" {
				t.Fatalf("got panic %v, want boom", got)
			}
		}()
		boom.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/?id=1", nil))
	}()
	if w := serve(ok, "POST", "/?id=1", ""); w.Code != http.StatusOK {
		t.Fatalf("got status %d, want 200 (lock released after the panic)", w.Code)
	}
}
