// Command nethttp is a small order service on net/http's ServeMux that
// puts padlock's pieces in their safe order:
//
//	authentication → idempotency → the order's lock → the handler
//
// so that a retried payment replays its first answer, two payments of one
// order never run at once, and nobody unauthenticated reaches either. An
// expensive report route holds one of two permits per merchant (a
// semaphore), and a settlement job runs once a minute across every
// instance of the service. main_test.go proves each of these with
// padlocktest, without a Redis server.
//
// Run it against a Redis (REDIS_ADDR, default localhost:6379); it listens
// on loopback (ADDR, default 127.0.0.1:8080; ADDR=:8080 serves every
// interface):
//
//	go run ./examples/nethttp
//	curl -X POST -H 'Authorization: Bearer alice-token' -H 'Idempotency-Key: k1' localhost:8080/orders/42/pay
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/schedule"
)

// settings reads where the service listens (ADDR, default 127.0.0.1:8080:
// loopback, so that a first run is not reachable from the network) and
// the Redis client's options (REDIS_ADDR, default localhost:6379) from
// getenv. The client has ContextTimeoutEnabled: go-redis applies a
// request's deadline to the socket only then, and without it a Redis that
// hangs holds a request for the client's ReadTimeout whatever the lock's
// wait says.
func settings(getenv func(string) string) (listen string, o *redis.Options) {
	listen = getenv("ADDR")
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	addr := getenv("REDIS_ADDR")
	if addr == "" {
		addr = "localhost:6379"
	}
	return listen, &redis.Options{Addr: addr, ContextTimeoutEnabled: true}
}

func main() {
	listen, o := settings(os.Getenv)
	rdb := redis.NewClient(o)
	defer rdb.Close()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		err := settleEvery(ctx, locker, time.Minute, settle)
		log.Printf("settlement loop stopped: %v", err)
	}()

	srv := &http.Server{Addr: listen, Handler: newServer(locker, rdb), ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	log.Printf("listening on %s", srv.Addr)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// newServer returns the service's routes.
func newServer(locker *padlock.Locker, rdb redis.UniversalClient) http.Handler {
	mux := http.NewServeMux()

	// A retry with the same Idempotency-Key gets the first answer back;
	// the store is scoped per caller, read from what authenticate found.
	idem := idempotency.New(locker, rdb, func(r *http.Request) (string, error) { return user(r), nil })
	// Each lock names its route and its caller, hashed, as its holder:
	// "route=POST /orders/<id>/pay caller=#3fa9c1e2d4b5".
	caller := httplock.WithCaller(func(_ context.Context, r *http.Request) string { return user(r) })
	// One payment per order at a time: the key is the route and the
	// order id as the handler reads it (an int64, so 042 is 42).
	orderLock := httplock.Lock(locker, httplock.PathValue("id", lockkey.Int(64)), caller)
	mux.Handle("POST /orders/{id}/pay", authenticate(idem(orderLock(http.HandlerFunc(pay)))))

	// At most two reports per merchant at once, across every instance;
	// a third gets 429 with Retry-After.
	reports, err := locker.Semaphore(2)
	if err != nil {
		panic(err) // only a Redlock Locker refuses semaphores
	}
	reportLimit := httplock.Limit(reports, httplock.PathValue("merchant", lockkey.Int(64)), http.StatusTooManyRequests, caller)
	mux.Handle("POST /merchants/{merchant}/report", authenticate(reportLimit(http.HandlerFunc(report))))
	return mux
}

// pay runs holding the order's lock. Its fence goes with every write, so
// that a store can refuse a holder whose lock was lost meanwhile.
func pay(w http.ResponseWriter, r *http.Request) {
	lk := padlock.FromContext(r.Context())
	// ... charge the order, writing with lk.Fence() ...
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"order":%q,"paid_by":%q,"fence":%d}`+"\n", r.PathValue("id"), user(r), lk.Fence())
}

// report is expensive: it stops when its permit is lost (r.Context()).
func report(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "report for merchant %s\n", r.PathValue("merchant"))
}

// settleEvery runs job once per interval across the fleet: every instance
// runs this loop, and one of them runs the job at each tick.
func settleEvery(ctx context.Context, locker *padlock.Locker, interval time.Duration, job func(context.Context) error) error {
	return schedule.Every(ctx, locker, "job:settle", interval, schedule.Options{AtMostFor: 5 * time.Minute}, job)
}

// settle is the fleet-wide job.
func settle(ctx context.Context) error {
	tick, _ := schedule.Tick(ctx)
	log.Printf("settling the minute before %s", tick.Format(time.TimeOnly))
	return nil
}

type userKey struct{}

// authenticate lets through requests with a known bearer token and puts
// the caller in the context. (A real service checks a session or a JWT.)
func authenticate(next http.Handler) http.Handler {
	tokens := map[string]string{"Bearer alice-token": "alice", "Bearer bob-token": "bob"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := tokens[r.Header.Get("Authorization")]
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// user returns the caller authenticate found, or "".
func user(r *http.Request) string {
	u, _ := r.Context().Value(userKey{}).(string)
	return u
}
