package middleware_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
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
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
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
	r.POST("/orders/:id/pay", middleware.Lock(locker, keyfunc.Param("id", lockkey.Int(64))), pay)

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
	// {"type":"about:blank","title":"Conflict","status":409,"detail":"another request holds the lock on this resource; retry later","instance":"/orders/42/pay","namespace":"/orders/$id/pay"}
	// 200 {"fenced":true,"paid":"42"}
}
