package middleware_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/middleware"
)

// One payment per order at a time: while a request pays order 42, a second
// one for the same order gets 409 with Retry-After and a problem body.
func ExampleLock() {
	mr := miniredis.NewMiniRedis() // stands in for a real Redis here
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	locker := padlock.New(rdb)
	defer locker.Close()

	paying := make(chan struct{})
	finish := make(chan struct{})
	pay := func(c *gin.Context) {
		lk := middleware.LockFrom(c) // c.Request.Context() carries it too
		close(paying)
		<-finish
		c.JSON(http.StatusOK, gin.H{"paid": c.Param("id"), "fenced": lk.Fence() > 0})
	}

	r := gin.New()
	r.POST("/orders/:id/pay", middleware.Lock(locker, keyfunc.Param("id")), pay)

	first := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.ServeHTTP(first, httptest.NewRequest("POST", "/orders/42/pay", nil))
	}()
	<-paying

	second := httptest.NewRecorder()
	r.ServeHTTP(second, httptest.NewRequest("POST", "/orders/42/pay", nil))
	fmt.Println(second.Code, second.Header().Get("Content-Type"), second.Header().Get("Retry-After"))
	fmt.Println(second.Body)

	close(finish)
	<-done
	fmt.Println(first.Code, first.Body)
	// Output:
	// 409 application/problem+json 30
	// {"type":"about:blank","title":"Conflict","status":409,"detail":"another request holds the lock on this resource; retry later","instance":"/orders/42/pay","key":"/orders/$id/pay:42"}
	// 200 {"fenced":true,"paid":"42"}
}

// The same for a net/http ServeMux.
func ExampleLockHTTP() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	locker := padlock.New(rdb)
	defer locker.Close()

	lock := middleware.LockHTTP(locker, keyfunc.PathValue("id"))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", lock(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("paying", r.PathValue("id"), "holding", padlock.FromContext(r.Context()).Key())
	})))
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/orders/42/pay", nil))
	// Output:
	// paying 42 holding POST /orders/<id>/pay:42
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
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	locker := padlock.New(rdb)
	defer locker.Close()

	logLost := middleware.WithReleaseError(func(r *http.Request, err error) {
		fmt.Printf("%s %s: %v\n", r.Method, r.URL.Path, err)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /jobs/{id}", middleware.LockHTTP(locker, keyfunc.PathValue("id"), logLost)(
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
