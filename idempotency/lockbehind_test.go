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
// at once: a busy lock's 409, the lock's 503 when its Redis does not
// answer (not kept busy for a lease, as a handler's own 503 is), and a
// limiter's 429. Each goes out marked not replayable, and the retry runs
// the handler once the lock or a permit is to be had, then replays. The
// handler's own 409, with a Retry-After or without, is its answer, and
// stored.
func TestRefusalsBehindFreeTheKey(t *testing.T) {
	t.Parallel() // servers of its own, one of which it pauses
	l, _, rdb := newLocker(t)
	ctx := context.Background()
	// The second lock lives on a Redis of its own, which stops answering.
	hung, hungSrv, _ := newLocker(t)
	var runs atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		switch r.PathValue("id") {
		case "3":
			w.Header().Set("Retry-After", "2")
			http.Error(w, "already paid, come back later", http.StatusConflict)
		case "4":
			http.Error(w, "already paid", http.StatusConflict)
		default:
			fmt.Fprintf(w, "paid, run %d", n)
		}
	})
	idem := idempotency.New(l, rdb, tester)
	id := httplock.PathValue("id", lockkey.Int(64))
	sem, err := l.Semaphore(1)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", idem(httplock.Lock(l, id)(handler)))
	mux.Handle("POST /hung/{id}/pay", idem(httplock.Lock(hung, id)(handler)))
	mux.Handle("POST /merchants/{id}/pay", idem(httplock.Limit(sem, id, http.StatusTooManyRequests)(handler)))
	mux.Handle("POST /refunds/{id}", idem(handler))

	for _, tc := range []struct {
		name, path, key string
		status          int
		refuse          func() (free func())
	}{
		{"lock busy", "/orders/1/pay", "k-busy", http.StatusConflict, func() func() {
			holder, err := l.Acquire(ctx, "POST /orders/<id>/pay:1", padlock.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return func() { _ = holder.Release(ctx) }
		}},
		{"lock's Redis hung", "/hung/1/pay", "k-hung", http.StatusServiceUnavailable, func() func() {
			hungSrv.Pause(t)
			return func() { hungSrv.Resume(t) }
		}},
		{"every permit taken", "/merchants/2/pay", "k-full", http.StatusTooManyRequests, func() func() {
			permit, err := sem.Acquire(ctx, "POST /merchants/<id>/pay:2", padlock.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return func() { _ = permit.Release(ctx) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs.Store(0)
			free := tc.refuse()
			for i := range 2 {
				w := send(mux, "POST", tc.path, "{}", tc.key)
				checkProblem(t, w, tc.status)
				if got := w.Header().Get(idempotency.ReplayableHeader); got != "false" {
					t.Fatalf("refused, try %d: got %s %q, want false", i+1, idempotency.ReplayableHeader, got)
				}
			}
			free()
			ran := send(mux, "POST", tc.path, "{}", tc.key)
			if ran.Code != http.StatusOK || ran.Body.String() != "paid, run 1" {
				t.Fatalf("retry once free: got %d %q, want the handler's first run", ran.Code, ran.Body)
			}
			checkReplay(t, send(mux, "POST", tc.path, "{}", tc.key), ran)
		})
	}

	runs.Store(0)
	for _, path := range []string{"/refunds/3", "/orders/4/pay"} {
		own := send(mux, "POST", path, "{}", "k-own-"+path[1:2])
		if own.Code != http.StatusConflict {
			t.Fatalf("%s: got %d, want the handler's own 409", path, own.Code)
		}
		checkReplay(t, send(mux, "POST", path, "{}", "k-own-"+path[1:2]), own)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("handler runs of its own 409s: got %d, want 2", n)
	}
}
