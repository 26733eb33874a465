package httplock_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/lockkey"
)

// At most 2 requests at once per merchant reach the payment provider, on
// a net/http ServeMux: a third, while two run, gets 429 with Retry-After
// and a problem body.
func ExampleLimit() {
	mr := miniredis.NewMiniRedis() // stands in for a real Redis here
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
	provider, err := locker.Semaphore(2)
	if err != nil {
		log.Fatal(err)
	}

	inside := make(chan struct{})
	finish := make(chan struct{})
	limit := httplock.Limit(provider, httplock.PathValue("id", lockkey.Int(64)), http.StatusTooManyRequests)
	mux := http.NewServeMux()
	mux.Handle("POST /merchants/{id}/charge", limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- struct{}{}
		<-finish
		w.WriteHeader(http.StatusNoContent)
	})))

	codes := make(chan int, 2)
	for range 2 {
		go func() {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest("POST", "/merchants/7/charge", nil))
			codes <- w.Code
		}()
		<-inside
	}
	third := httptest.NewRecorder()
	mux.ServeHTTP(third, httptest.NewRequest("POST", "/merchants/7/charge", nil))
	fmt.Println(third.Code, third.Header().Get("Retry-After"))
	fmt.Println(third.Body)
	close(finish)
	fmt.Println(<-codes, <-codes)
	// Output:
	// 429 1
	// {"type":"about:blank","title":"Too Many Requests","status":429,"detail":"too many requests for this resource are running at once; retry later","instance":"/merchants/7/charge","namespace":"POST /merchants/\u003cid\u003e/charge"}
	// 204 204
}
