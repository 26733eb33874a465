package httplock_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

// Requests that hold their lock for 50ms make a busy answer say
// "Retry-After: 1", the header's minimum, not the holder's renewed 30s
// lease.
func TestLockRetryAfterFromHoldTimes(t *testing.T) {
	l, _, _ := newLocker(t)
	block := make(chan struct{})
	blocked := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("POST /jobs/{id}", httplock.Lock(l, httplock.PathValue("id", lockkey.Int(64)))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.PathValue("id") == "1" {
				close(blocked)
				<-block
				return
			}
			time.Sleep(50 * time.Millisecond)
		})))
	for i := range 3 {
		if w := serve(mux, "POST", "/jobs/"+string(rune('2'+i)), ""); w.Code != http.StatusOK {
			t.Fatalf("got status %d, want 200", w.Code)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); serve(mux, "POST", "/jobs/1", "") }()
	<-blocked
	w := serve(mux, "POST", "/jobs/1", "")
	close(block)
	<-done
	checkProblem(t, w, http.StatusConflict)
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Fatalf("got Retry-After %q, want 1 (holds take 50ms), not the %v lease", got, padlock.DefaultTTL)
	}
}

// Requests that hold their lock longer than the holder has left: the
// answer is capped at the holder's remaining lease.
func TestLockRetryAfterCappedByLease(t *testing.T) {
	t.Parallel() // a server of its own; its handler runs 3s
	l, _, _ := newLocker(t)
	mux := http.NewServeMux()
	mux.Handle("POST /jobs/{id}", httplock.Lock(l, httplock.PathValue("id", lockkey.Int(64)))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(3 * time.Second) })))
	if w := serve(mux, "POST", "/jobs/2", ""); w.Code != http.StatusOK {
		t.Fatalf("got status %d, want 200", w.Code)
	}
	lk, err := l.Acquire(context.Background(), "POST /jobs/<id>:1", padlock.Options{TTL: 2 * time.Second, NoRenew: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(context.Background())
	w := serve(mux, "POST", "/jobs/1", "")
	checkProblem(t, w, http.StatusConflict)
	if got := w.Header().Get("Retry-After"); got != "2" {
		t.Fatalf("got Retry-After %q, want 2 (the lease left), not the 3s holds", got)
	}
}
