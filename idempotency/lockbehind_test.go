package idempotency_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/lockkey"
)

// Behind the middleware, a busy lock's 409 asks the client to retry: it
// is not stored, and the retry with the same key runs the handler once
// the lock is free. The handler's own 409 (no Retry-After) is the key's
// answer, as before.
func TestLockBehindIsNotStored(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := context.Background()
	var runs atomic.Int64
	mux := http.NewServeMux()
	idem := idempotency.New(l, rdb, tester)
	lock := httplock.Lock(l, httplock.PathValue("id", lockkey.Int(64)))
	mux.Handle("POST /orders/{id}/pay", idem(lock(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if r.PathValue("id") == "2" {
			http.Error(w, "already paid", http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "paid, run %d", n)
	}))))

	holder, err := l.Acquire(ctx, "POST /orders/<id>/pay:1", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	busy := send(mux, "POST", "/orders/1/pay", "{}", "k1")
	if busy.Code != http.StatusConflict || busy.Header().Get("Retry-After") == "" {
		t.Fatalf("while held: got %d Retry-After %q, want 409 with Retry-After", busy.Code, busy.Header().Get("Retry-After"))
	}
	if got := busy.Header().Get(idempotency.ReplayableHeader); got != "false" {
		t.Errorf("busy answer: got %s %q, want false", idempotency.ReplayableHeader, got)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	retry := send(mux, "POST", "/orders/1/pay", "{}", "k1")
	if retry.Code != http.StatusOK || retry.Body.String() != "paid, run 1" {
		t.Fatalf("retry after the lock freed: got %d %q, want the handler's first run", retry.Code, retry.Body)
	}
	checkReplay(t, send(mux, "POST", "/orders/1/pay", "{}", "k1"), retry)

	own := send(mux, "POST", "/orders/2/pay", "{}", "k2")
	checkReplay(t, send(mux, "POST", "/orders/2/pay", "{}", "k2"), own)
	if n := runs.Load(); n != 2 {
		t.Errorf("handler runs: got %d, want 2", n)
	}
}
