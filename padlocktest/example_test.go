package padlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/padlocktest"
	"github.com/padlockgo/padlock/schedule"
)

// payHandler is the code under test: it locks the order it pays for and
// answers 409 while another request holds it, and 503 when Redis is gone.
func payHandler(l *padlock.Locker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lk, err := l.Acquire(r.Context(), "order:"+r.PathValue("id"), padlock.Options{})
		switch {
		case errors.Is(err, padlock.ErrNotAcquired):
			if d, ok := padlock.RetryAfter(err); ok {
				w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
			}
			http.Error(w, "order is being paid", http.StatusConflict)
			return
		case err != nil:
			http.Error(w, "lock service unavailable", http.StatusServiceUnavailable)
			return
		}
		defer lk.Release(context.WithoutCancel(r.Context()))
		w.WriteHeader(http.StatusNoContent)
	})
}

// A handler's 409 and 503 paths, tested without a Redis server. In a test,
// padlocktest.New(t) replaces Start and the deferred Close.
func Example() {
	env, err := padlocktest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", payHandler(env.Locker()))
	pay := func() *http.Response {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", "/orders/42/pay", nil))
		return rec.Result()
	}

	fmt.Println("free:", pay().StatusCode)

	ctx := context.Background()
	holder, err := env.Busy(ctx, "order:42", time.Minute)
	if err != nil {
		panic(err)
	}
	resp := pay()
	fmt.Println("busy:", resp.StatusCode, "Retry-After", resp.Header.Get("Retry-After"))
	_ = holder.Release(ctx)

	env.Down()
	fmt.Println("down:", pay().StatusCode)
	if err := env.Up(); err != nil {
		panic(err)
	}
	fmt.Println("up again:", pay().StatusCode)
	// Output:
	// free: 204
	// busy: 409 Retry-After 60
	// down: 503
	// up again: 204
}

func ExampleEnv_Busy() {
	env, err := padlocktest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()

	if _, err := env.Busy(ctx, "report", 5*time.Second); err != nil {
		panic(err)
	}
	_, err = env.Locker().Acquire(ctx, "report", padlock.Options{})
	d, _ := padlock.RetryAfter(err)
	fmt.Println(errors.Is(err, padlock.ErrNotAcquired), d > 4*time.Second && d <= 5*time.Second)
	// Output: true true
}

func ExampleEnv_LoseLock() {
	env, err := padlocktest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()

	lk, err := env.Locker().Acquire(ctx, "job:nightly", padlock.Options{})
	if err != nil {
		panic(err)
	}
	work := lk.Context(ctx) // what the guarded code runs with

	if err := env.LoseLock(ctx, lk); err != nil {
		panic(err)
	}
	<-work.Done() // already closed: LoseLock waits for nothing
	fmt.Println(context.Cause(work))
	// Output: padlock: lock lost
}

// Lose reaches locks the test holds no handle to, here one taken as a
// middleware would take it. With a lease of a second, its holder learns of
// the loss within about a third of a second, at its next renewal.
func ExampleEnv_Lose() {
	env, err := padlocktest.Start(padlocktest.WithLockerOptions(
		padlock.WithDefaults(padlock.Options{TTL: time.Second})))
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()

	lk, err := env.Locker().Acquire(ctx, "order:42", padlock.Options{})
	if err != nil {
		panic(err)
	}
	request := lk.Context(ctx) // the context the handler works under

	fmt.Println("lost:", env.Lose("order:42"))
	<-request.Done()
	fmt.Println(context.Cause(request))
	// Output:
	// lost: true
	// padlock: lock lost
}

func ExampleEnv_Down() {
	env, err := padlocktest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()

	env.Down()
	_, err = env.Locker().Acquire(ctx, "k", padlock.Options{})
	fmt.Println("down:", errors.Is(err, padlock.ErrUnavailable))

	if err := env.Up(); err != nil {
		panic(err)
	}
	lk, err := env.Locker().Acquire(ctx, "k", padlock.Options{})
	fmt.Println("up:", err)
	_ = lk.Release(ctx)
	// Output:
	// down: true
	// up: <nil>
}

// With a manual clock a busy key stays busy until the test moves Redis's
// clock past its lease, however long the test takes.
func ExampleWithManualClock() {
	env, err := padlocktest.Start(padlocktest.WithManualClock())
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()

	if _, err := env.Busy(ctx, "k", time.Second); err != nil {
		panic(err)
	}
	_, err = env.Locker().Acquire(ctx, "k", padlock.Options{})
	fmt.Println("before:", errors.Is(err, padlock.ErrNotAcquired))

	env.Advance(time.Second)
	lk, err := env.Locker().Acquire(ctx, "k", padlock.Options{})
	fmt.Println("after Advance:", err)
	_ = lk.Release(ctx)
	// Output:
	// before: true
	// after Advance: <nil>
}

// BusyFor and LoseFor find the lock a request takes by asking the app's
// router (httplock.KeyFor), so the test never spells the key.
func ExampleEnv_LoseFor() {
	env, err := padlocktest.Start(padlocktest.WithLockerOptions(
		padlock.WithDefaults(padlock.Options{TTL: time.Second})))
	if err != nil {
		panic(err)
	}
	defer env.Close()

	paying := make(chan struct{})
	mux := http.NewServeMux()
	pay := httplock.Lock(env.Locker(), httplock.PathValue("id", lockkey.Int(64)))
	mux.Handle("POST /orders/{id}/pay", pay(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(paying)
		<-r.Context().Done() // the payment would go on here; the loss cancels it
		fmt.Println("handler:", context.Cause(r.Context()))
	})))
	req := func() *http.Request { return httptest.NewRequest("POST", "/orders/042/pay", nil) }

	key, _ := httplock.KeyFor(mux, req())
	fmt.Println("key:", key)

	done := make(chan struct{})
	go func() {
		defer close(done)
		mux.ServeHTTP(httptest.NewRecorder(), req())
	}()
	<-paying
	lost, err := env.LoseFor(mux, req())
	fmt.Println("lost:", lost, err)
	<-done
	// Output:
	// key: POST /orders/<id>/pay:42
	// lost: true <nil>
	// handler: padlock: lock lost
}

// A job that runs every hour across a fleet, tested over a day of ticks
// in no time: the Env's Clock is the job's clock, and each Advance is the
// next hour, for the job and for Redis.
func ExampleEnv_Clock() {
	env, err := padlocktest.Start(padlocktest.WithManualClock())
	if err != nil {
		panic(err)
	}
	defer env.Close()
	clock := env.Clock()

	runs := make(chan time.Time, 24)
	report := func(ctx context.Context) error {
		tick, _ := schedule.Tick(ctx)
		runs <- tick
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- schedule.Every(ctx, env.Locker(), "report:hourly", time.Hour, schedule.Options{Clock: clock}, report)
	}()
	for range 24 {
		_ = clock.AwaitWaiters(context.Background(), 1) // the job waits for its next tick
		clock.Advance(time.Hour)
		<-runs
	}
	cancel()
	fmt.Println(<-done)
	fmt.Println("the day's last report is for", clock.Now().Format("2006-01-02 15:04")[11:])
	// Output:
	// context canceled
	// the day's last report is for 00:00
}
