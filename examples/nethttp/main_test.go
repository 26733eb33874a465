package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/padlocktest"
	"github.com/padlockgo/padlock/schedule"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // Redis taken down on purpose: no log of each failed dial
	os.Exit(m.Run())
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// request returns a request from alice; idemKey, when set, is its
// Idempotency-Key.
func request(method, target, idemKey string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.Header.Set("Authorization", "Bearer alice-token")
	if idemKey != "" {
		r.Header.Set("Idempotency-Key", idemKey)
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A retried payment gets its first answer back, marked as a replay; the
// handler does not pay twice.
func TestPayReplaysARetry(t *testing.T) {
	env := padlocktest.New(t)
	srv := newServer(env.Locker(), env.Client())

	first := serve(srv, request("POST", "/orders/42/pay", "k1"))
	if first.Code != http.StatusOK {
		t.Fatalf("first payment: got %d %s, want 200", first.Code, first.Body)
	}
	retry := serve(srv, request("POST", "/orders/42/pay", "k1"))
	if retry.Code != http.StatusOK || retry.Header().Get("Idempotent-Replayed") != "true" || retry.Body.String() != first.Body.String() {
		t.Errorf("retry: got %d replayed=%q %s, want the first answer (%s) replayed",
			retry.Code, retry.Header().Get("Idempotent-Replayed"), retry.Body, first.Body)
	}
	again := serve(srv, request("POST", "/orders/42/pay", "k2"))
	if again.Header().Get("Idempotent-Replayed") != "" || again.Body.String() == first.Body.String() {
		t.Errorf("a new key: got replayed=%q %s, want a new payment (a new fence)", again.Header().Get("Idempotent-Replayed"), again.Body)
	}
}

// While another instance pays order 42, a payment of it is refused with
// 409 and Retry-After; the test asks the server for the order's key.
func TestPayRefusesAnOrderInPayment(t *testing.T) {
	env := padlocktest.New(t)
	srv := newServer(env.Locker(), env.Client())
	ctx := ctxFor(t)

	req := request("POST", "/orders/042/pay", "k1")
	if key, err := httplock.KeyFor(srv, req); key != "POST /orders/<id>/pay:42" || err != nil {
		t.Fatalf("KeyFor = %q, %v; want the order's key", key, err)
	}
	holder, err := env.BusyFor(ctx, srv, req, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w := serve(srv, req)
	if w.Code != http.StatusConflict || w.Header().Get("Retry-After") == "" || w.Header().Get("Content-Type") != httplock.ProblemContentType {
		t.Fatalf("payment of a held order: got %d Retry-After %q %s, want 409 with Retry-After and a problem", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The 409 was not stored: the retry with the same key pays now.
	if w := serve(srv, request("POST", "/orders/042/pay", "k1")); w.Code != http.StatusOK {
		t.Errorf("retry after the holder let go: got %d %s, want 200", w.Code, w.Body)
	}
}

// Authentication comes first: no lock, no idempotency record, for a
// stranger. With Redis gone, a payment is 503, never paid without its lock.
func TestPayRefusals(t *testing.T) {
	env := padlocktest.New(t)
	srv := newServer(env.Locker(), env.Client())

	anon := httptest.NewRequest("POST", "/orders/42/pay", nil)
	anon.Header.Set("Idempotency-Key", "k1")
	if w := serve(srv, anon); w.Code != http.StatusUnauthorized {
		t.Errorf("unauthenticated: got %d, want 401", w.Code)
	}
	if keys := env.Miniredis().Keys(); len(keys) != 0 {
		t.Errorf("unauthenticated request left %v in Redis, want nothing", keys)
	}
	env.Down()
	if w := serve(srv, request("POST", "/orders/42/pay", "k1")); w.Code != http.StatusServiceUnavailable {
		t.Errorf("Redis down: got %d %s, want 503", w.Code, w.Body)
	}
}

// Two reports per merchant at once: with both permits taken, a third is
// refused with 429; when one frees, it goes through.
func TestReportIsLimited(t *testing.T) {
	env := padlocktest.New(t)
	srv := newServer(env.Locker(), env.Client())
	ctx := ctxFor(t)

	key, err := httplock.KeyFor(srv, request("POST", "/merchants/7/report", ""))
	if err != nil {
		t.Fatal(err)
	}
	sem, err := env.Locker().Semaphore(2) // two reports running elsewhere
	if err != nil {
		t.Fatal(err)
	}
	var permits []*padlock.Lock
	for range 2 {
		p, err := sem.Acquire(ctx, key, padlock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		permits = append(permits, p)
	}
	w := serve(srv, request("POST", "/merchants/7/report", ""))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("third report: got %d Retry-After %q, want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if w := serve(srv, request("POST", "/merchants/8/report", "")); w.Code != http.StatusOK {
		t.Errorf("another merchant's report: got %d, want 200", w.Code)
	}
	if err := permits[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if w := serve(srv, request("POST", "/merchants/7/report", "")); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "merchant 7") {
		t.Errorf("report after a permit freed: got %d %s, want 200", w.Code, w.Body)
	}
}

// Two instances run the settlement loop; each tick, one of them settles.
func TestSettleRunsOncePerTick(t *testing.T) {
	env := padlocktest.New(t)
	other, err := padlock.New(env.Client()) // a second instance of the service
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ctx, stop := context.WithCancel(ctxFor(t))
	defer stop()

	var (
		mu      sync.Mutex
		settled = map[time.Time]int{}
	)
	runs := make(chan struct{}, 100)
	job := func(ctx context.Context) error {
		tick, _ := schedule.Tick(ctx)
		mu.Lock()
		settled[tick]++
		mu.Unlock()
		runs <- struct{}{}
		return nil
	}
	var wg sync.WaitGroup
	for _, l := range []*padlock.Locker{env.Locker(), other} {
		wg.Go(func() { _ = settleEvery(ctx, l, 100*time.Millisecond, job) })
	}
	for range 3 {
		<-runs
	}
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for tick, n := range settled {
		if n != 1 {
			t.Errorf("tick %s: settled %d times, want once", tick.Format(time.TimeOnly), n)
		}
	}
}

// A first run listens on loopback only, and ADDR widens it; the client
// carries deadlines to the socket (ContextTimeoutEnabled), so a Redis that
// hangs cannot hold a request past its lock's wait.
func TestSettings(t *testing.T) {
	listen, o := settings(func(string) string { return "" })
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Errorf("default listen address: got %q, want a loopback one", listen)
	}
	if !o.ContextTimeoutEnabled || o.Addr != "localhost:6379" {
		t.Errorf("default client: got Addr %q, ContextTimeoutEnabled %v; want localhost:6379 and true", o.Addr, o.ContextTimeoutEnabled)
	}
	env := map[string]string{"ADDR": ":9090", "REDIS_ADDR": "redis.internal:6380"}
	listen, o = settings(func(k string) string { return env[k] })
	if listen != ":9090" || o.Addr != "redis.internal:6380" || !o.ContextTimeoutEnabled {
		t.Errorf("configured: got %q, %q, %v; want :9090, redis.internal:6380, true", listen, o.Addr, o.ContextTimeoutEnabled)
	}
}
