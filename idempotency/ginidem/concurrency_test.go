package ginidem_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/idempotency/ginidem"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
)

// The same key while the first request runs: 409 with Retry-After and a
// problem body; once it finished, the replay.
func TestIdempotencyInFlight(t *testing.T) {
	l, _, rdb := newLocker(t)
	entered := make(chan struct{})
	finish := make(chan struct{})
	var runs atomic.Int64
	r := gin.New()
	r.POST("/pay", ginidem.New(l, rdb, tester), func(c *gin.Context) {
		runs.Add(1)
		if ginidem.KeyFrom(c) == "k1" {
			close(entered)
			<-finish
		}
		c.String(http.StatusCreated, "paid")
	})

	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- send(r, "POST", "/pay", "", key("k1")) }()
	<-entered
	w := send(r, "POST", "/pay", "", key("k1"))
	p := checkProblem(t, w, http.StatusConflict)
	if p.Detail != "a request with this Idempotency-Key is still being processed; retry later" || p.Key != "" {
		t.Fatalf("got detail %q, key %q, want the in-progress detail and no key", p.Detail, p.Key)
	}
	if ra := w.Header().Get("Retry-After"); ra != "1" {
		t.Fatalf("got Retry-After %q, want 1", ra)
	}
	// Another key is not held up.
	if w := send(r, "POST", "/pay", "", key("k2")); w.Code != http.StatusCreated {
		t.Fatalf("got %d for another key, want 201", w.Code)
	}
	close(finish)
	f := <-first
	if f.Code != http.StatusCreated {
		t.Fatalf("got %d %s for the first request, want 201", f.Code, f.Body)
	}
	checkReplay(t, send(r, "POST", "/pay", "", key("k1")), f)
	if got := runs.Load(); got != 2 {
		t.Fatalf("got %d handler runs, want 2 (k1 once, k2 once)", got)
	}
}

// 100 identical requests at once. With WithWaitForInFlight the handler runs
// once and all 100 get the same answer, 99 of them as replays. Without it,
// the handler still runs once; the others get 409 while it runs.
func TestIdempotencyConcurrent(t *testing.T) {
	tests := []struct {
		name string
		opts []idempotency.Option
		wait bool
	}{
		{"wait for in flight", []idempotency.Option{idempotency.WithWaitForInFlight(30 * time.Second)}, true},
		{"409 while in flight", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 100
			o := newOrdersFor(t, n, tester, tt.opts...)
			slow := gin.New()
			// Slow enough that the duplicates arrive while it runs.
			slow.POST("/orders", ginidem.New(o.l, o.rdb, tester, tt.opts...), func(c *gin.Context) {
				time.Sleep(50 * time.Millisecond)
				o.create(c)
			})
			start := make(chan struct{})
			res := make([]*httptest.ResponseRecorder, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					res[i] = send(slow, "POST", "/orders", `{"item":"book"}`, key("same"))
				})
			}
			close(start)
			wg.Wait()

			if got := o.runs.Load(); got != 1 {
				codes := map[int]int{}
				var first string
				for _, w := range res {
					codes[w.Code]++
					if w.Code != http.StatusConflict && w.Code != http.StatusCreated && first == "" {
						first = w.Body.String()
					}
				}
				t.Fatalf("got %d handler runs, want 1; answers by status %v (the first other: %s)", got, codes, first)
			}
			var answers, replays, busy int
			for _, w := range res {
				switch {
				case w.Code == http.StatusConflict && !tt.wait:
					checkProblem(t, w, http.StatusConflict)
					busy++
				case w.Code != http.StatusCreated || w.Body.String() != `{"id":1,"item":"book"}` || w.Header().Get("Location") != "/orders/1":
					t.Fatalf("got %d %s (Location %q), want 201 {\"id\":1,\"item\":\"book\"} at /orders/1",
						w.Code, w.Body, w.Header().Get("Location"))
				case w.Header().Get("Idempotent-Replayed") == "true":
					replays++
				default:
					answers++
				}
			}
			if answers != 1 {
				t.Fatalf("got %d original answers, want 1", answers)
			}
			if tt.wait && replays != n-1 {
				t.Fatalf("got %d replays, want %d", replays, n-1)
			}
			if !tt.wait && (replays+busy != n-1 || busy == 0) {
				t.Fatalf("got %d replays and %d 409s, want %d together and some 409s", replays, busy, n-1)
			}
			t.Logf("%d replays, %d 409s", replays, busy)
		})
	}
}

// A process that died holding a key's in-flight lock: the key is busy
// until the lease runs out, then a retry runs the handler. The holder is
// simulated by another Locker (another process) taking the in-flight lock
// with a lease that is never renewed, as a dead process's is not.
func TestIdempotencyCrashedHolder(t *testing.T) {
	o := newOrders(t, keyfunc.Header("X-Client-ID", lockkey.Text()))
	dead := lockerOn(t, o.srv.Client(t))
	const lease = 400 * time.Millisecond
	lk, err := dead.Acquire(context.Background(), "idempotency:/orders:alice:k1", padlock.Options{TTL: lease, NoRenew: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = lk // never released: its process "crashed"
	taken := time.Now()

	w := send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"), "X-Client-ID", "alice")
	checkProblem(t, w, http.StatusConflict)
	// The lease runs out on Redis; a retry then runs the handler once.
	time.Sleep(time.Until(taken.Add(lease + 50*time.Millisecond)))
	w = send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"), "X-Client-ID", "alice")
	if w.Code != http.StatusCreated || o.runs.Load() != 1 {
		t.Fatalf("after the lease: got %d %s, %d runs, want 201 and 1 run", w.Code, w.Body, o.runs.Load())
	}
	checkReplay(t, send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"), "X-Client-ID", "alice"), w)
}

// A process stops renewing its in-flight lock while its handler still
// runs (it hangs, or loses Redis; here its Locker is closed): the key frees
// after WithInFlightTTL and a retry on another process runs and stores. The
// hung handler's context is cancelled, and when it finally returns, its
// late answer reaches its own client but does not replace the stored one.
func TestIdempotencyRenewalStopped(t *testing.T) {
	l, srv, rdb := newLocker(t)
	hungLocker := lockerOn(t, srv.Client(t))
	opts := []idempotency.Option{idempotency.WithInFlightTTL(300 * time.Millisecond)}

	entered := make(chan struct{})
	finish := make(chan struct{})
	var cause error
	hung := gin.New()
	hung.POST("/pay", ginidem.New(hungLocker, rdb, tester, opts...), func(c *gin.Context) {
		close(entered)
		<-c.Request.Context().Done()
		cause = context.Cause(c.Request.Context())
		<-finish
		c.String(http.StatusCreated, "hung")
	})
	healthy := gin.New()
	healthy.POST("/pay", ginidem.New(l, rdb, tester, opts...), func(c *gin.Context) {
		c.String(http.StatusCreated, "healthy")
	})

	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- send(hung, "POST", "/pay", "", key("k1")) }()
	<-entered
	if w := send(healthy, "POST", "/pay", "", key("k1")); w.Code != http.StatusConflict {
		t.Fatalf("while renewed: got %d %s, want 409", w.Code, w.Body)
	}
	_ = hungLocker.Close() // renewal stops; the lease runs out

	var w *httptest.ResponseRecorder
	deadline := time.Now().Add(5 * time.Second)
	for {
		w = send(healthy, "POST", "/pay", "", key("k1"))
		if w.Code != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if w.Code != http.StatusCreated || w.Body.String() != "healthy" {
		t.Fatalf("after the lease ran out: got %d %q, want 201 healthy", w.Code, w.Body)
	}
	close(finish)
	if f := <-first; f.Body.String() != "hung" {
		t.Fatalf("got %d %q for the hung request, want its own answer", f.Code, f.Body)
	}
	if !errors.Is(cause, padlock.ErrLockLost) {
		t.Fatalf("got context cause %v in the hung handler, want %v", cause, padlock.ErrLockLost)
	}
	checkReplay(t, send(healthy, "POST", "/pay", "", key("k1")), w)
}

// Two callers that send the same key and body are two keys: each runs the
// handler once and replays only its own answer.
func TestIdempotencyCallersIsolated(t *testing.T) {
	o := newOrders(t, func(c *gin.Context) (string, error) {
		return c.GetHeader("X-Client-ID"), nil
	})
	alice := send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"), "X-Client-ID", "alice")
	bob := send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"), "X-Client-ID", "bob")
	if alice.Body.String() != `{"id":1,"item":"book"}` || bob.Body.String() != `{"id":2,"item":"book"}` {
		t.Fatalf("got alice %s, bob %s, want orders 1 and 2", alice.Body, bob.Body)
	}
	// A caller made to look like another by a separator does not collide.
	mallory := send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"), "X-Client-ID", "alice:k1")
	if mallory.Body.String() != `{"id":3,"item":"book"}` {
		t.Fatalf("got %s for caller alice:k1, want order 3", mallory.Body)
	}
	checkReplay(t, send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"), "X-Client-ID", "alice"), alice)
	checkReplay(t, send(o.r, "POST", "/orders", `{"item":"book"}`, key("k1"), "X-Client-ID", "bob"), bob)
	if got := o.runs.Load(); got != 3 {
		t.Fatalf("got %d handler runs, want 3", got)
	}
}

// Writes from goroutines of the handler, while it runs and after it
// returned, do not race with the middleware (go test -race); the late ones
// fail and change nothing.
func TestIdempotencyConcurrentWrites(t *testing.T) {
	l, _, rdb := newLocker(t)
	late := make(chan error, 1)
	release := make(chan struct{})
	r := gin.New()
	r.POST("/pay", ginidem.New(l, rdb, tester), func(c *gin.Context) {
		w := c.Writer
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 25 {
					_, _ = w.WriteString("x")
					_ = w.Status()
					_ = w.Size()
				}
			})
		}
		wg.Wait()
		go func() {
			<-release
			_, err := w.WriteString("late")
			w.WriteHeader(http.StatusTeapot)
			late <- err
		}()
	})
	first := send(r, "POST", "/pay", "", key("k1"))
	close(release)
	if err := <-late; err == nil {
		t.Fatal("got no error from a write after the handler returned, want one")
	}
	if first.Code != http.StatusOK || first.Body.Len() != 100 {
		t.Fatalf("got %d and %d bytes, want 200 and 100", first.Code, first.Body.Len())
	}
	checkReplay(t, send(r, "POST", "/pay", "", key("k1")), first)
}
