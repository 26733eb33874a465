package httplock_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

// One payment per order at a time on a net/http ServeMux. The id is read
// as the handler parses it, an int64, so /orders/042/pay locks order 42.
func ExampleLock() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lock := httplock.Lock(locker, httplock.PathValue("id", lockkey.Int(64)))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", lock(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("paying", r.PathValue("id"), "holding", padlock.FromContext(r.Context()).Key())
	})))
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/orders/042/pay", nil))
	// Output:
	// paying 042 holding POST /orders/<id>/pay:42
}

// A lock lost while the handler ran (here its key is deleted behind its
// back) shows at the latest when the middleware releases it, after the
// handler returned: log such requests with WithReleaseError.
func ExampleWithReleaseError() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	logLost := httplock.WithReleaseError(func(r *http.Request, err error) {
		fmt.Printf("%s %s: %v\n", r.Method, r.URL.Path, err)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /jobs/{id}", httplock.Lock(locker, httplock.PathValue("id", lockkey.Int(64)), logLost)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mr.Del("padlock:{POST /jobs/<id>:7}") // the lock's key in Redis
			w.WriteHeader(http.StatusAccepted)
		})))

	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("POST", "/jobs/7", nil))
	fmt.Println(w.Code)
	// Output:
	// POST /jobs/7: padlock: lock not held
	// 202
}

// A handler that outlasts WithMaxHold: its context is cancelled at the
// bound, whatever the client does, and the lock released when it returns;
// having written nothing by then, the request gets 503.
func ExampleWithMaxHold() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lock := httplock.Lock(locker, httplock.PathValue("id", lockkey.Int(64)), httplock.WithMaxHold(50*time.Millisecond))
	mux := http.NewServeMux()
	mux.Handle("POST /exports/{id}", lock(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // a slow export
		fmt.Println("cause:", context.Cause(r.Context()))
	})))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("POST", "/exports/7", nil))
	fmt.Println(w.Code)
	// Output:
	// cause: httplock: request held the lock past WithMaxHold
	// 503
}

// KeyFor asks the router which key a request would lock: the route
// template (with its method on http.ServeMux) and the canonical id. No
// lock is taken and the handler does not run.
func ExampleKeyFor() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lock := httplock.Lock(locker, httplock.PathValue("id", lockkey.Int(64)))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", lock(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		fmt.Println("never runs")
	})))
	mux.Handle("GET /orders/{id}", http.NotFoundHandler())

	key, err := httplock.KeyFor(mux, httptest.NewRequest("POST", "/orders/042/pay", nil))
	fmt.Printf("%q %v\n", key, err)
	_, err = httplock.KeyFor(mux, httptest.NewRequest("GET", "/orders/42", nil))
	fmt.Println(err)
	// Output:
	// "POST /orders/<id>/pay:42" <nil>
	// httplock: the request takes no lock: GET /orders/42 met no Lock or Limit on its way, and was answered 404 Not Found
}
