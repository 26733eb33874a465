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

// A success or redirect that says when to check back (202 Accepted with
// Location and Retry-After, a 201 or 303 with one) is the key's answer
// like any other: stored, and replayed to a retry, which never runs the
// handler again (a second job, a second charge).
func TestRetryAfterSuccessIsStored(t *testing.T) {
	l, _, rdb := newLocker(t)
	for _, status := range []int{http.StatusCreated, http.StatusAccepted, http.StatusSeeOther} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var runs atomic.Int64
			mux := http.NewServeMux()
			mux.Handle("POST /jobs", idempotency.New(l, rdb, tester)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				w.Header().Set("Location", fmt.Sprintf("/jobs/%d", n))
				w.Header().Set("Retry-After", "5")
				w.WriteHeader(status)
				fmt.Fprintf(w, "job %d accepted", n)
			})))
			key := fmt.Sprintf("k-%d", status)
			first := send(mux, "POST", "/jobs", "{}", key)
			if first.Code != status || first.Header().Get(idempotency.ReplayableHeader) == "false" {
				t.Fatalf("first: got %d, %s %q; want %d, stored", first.Code, idempotency.ReplayableHeader, first.Header().Get(idempotency.ReplayableHeader), status)
			}
			retry := send(mux, "POST", "/jobs", "{}", key)
			checkReplay(t, retry, first)
			if got := retry.Header().Get("Location"); got != "/jobs/1" {
				t.Errorf("replay: got Location %q, want /jobs/1", got)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("handler runs: got %d, want 1", n)
			}
		})
	}
}

// Behind the middleware, every refusal of a lock or limiter frees the key
// at once: the lock's 503 when its Redis is down (not kept busy for a
// lease, as a handler's own 503 is), and a limiter's 429; the retry runs
// the handler once the lock or a permit is to be had. The handler's own
// 409 with a Retry-After is its answer, and stored.
func TestRefusalsBehindFreeTheKey(t *testing.T) {
	l, _, rdb := newLocker(t)
	ctx := context.Background()

	// The lock behind lives on a Redis of its own, which goes down.
	down, downSrv, _ := newLocker(t)
	var runs atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if r.PathValue("id") == "3" {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "already paid, come back later", http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "paid, run %d", n)
	})
	idem := idempotency.New(l, rdb, tester)
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", idem(httplock.Lock(down, httplock.PathValue("id", lockkey.Int(64)))(handler)))
	sem, err := l.Semaphore(1)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("POST /merchants/{id}/pay", idem(httplock.Limit(sem, httplock.PathValue("id", lockkey.Int(64)), http.StatusTooManyRequests)(handler)))
	mux.Handle("POST /refunds/{id}", idem(handler))

	downSrv.Kill(t)
	for i := range 2 {
		w := send(mux, "POST", "/orders/1/pay", "{}", "k-down")
		checkProblem(t, w, http.StatusServiceUnavailable)
		if got := w.Header().Get(idempotency.ReplayableHeader); got != "false" {
			t.Fatalf("lock down, try %d: got %s %q, want false", i+1, idempotency.ReplayableHeader, got)
		}
	}

	permit, err := sem.Acquire(ctx, "POST /merchants/<id>/pay:2", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkProblem(t, send(mux, "POST", "/merchants/2/pay", "{}", "k-full"), http.StatusTooManyRequests)
	if err := permit.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ran := send(mux, "POST", "/merchants/2/pay", "{}", "k-full")
	if ran.Code != http.StatusOK || ran.Body.String() != "paid, run 1" {
		t.Fatalf("retry once a permit is free: got %d %q, want the handler's first run", ran.Code, ran.Body)
	}
	checkReplay(t, send(mux, "POST", "/merchants/2/pay", "{}", "k-full"), ran)

	own := send(mux, "POST", "/refunds/3", "{}", "k-own")
	checkReplay(t, send(mux, "POST", "/refunds/3", "{}", "k-own"), own)
	if n := runs.Load(); n != 2 {
		t.Errorf("handler runs: got %d, want 2", n)
	}
}
