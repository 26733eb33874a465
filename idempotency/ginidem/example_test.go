package ginidem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/idempotency/ginidem"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
)

// A retried create gets the first answer back instead of a second order;
// the same key with another body is refused.
func ExampleNew() {
	mr := miniredis.NewMiniRedis() // stands in for a real Redis here
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	locker := padlock.New(rdb)
	defer locker.Close()

	orders := 0
	create := func(c *gin.Context) {
		var in struct{ Item string }
		if err := c.ShouldBindJSON(&in); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		orders++
		c.JSON(http.StatusCreated, gin.H{"id": orders, "item": in.Item})
	}

	r := gin.New()
	r.POST("/orders", ginidem.New(locker, rdb,
		keyfunc.Header("X-Client-ID", lockkey.Text()), // whose key it is
	), create)

	post := func(key, body string) {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
		req.Header.Set("X-Client-ID", "shop-1")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	post(`"a1b2c3"`, `{"item":"book"}`) // runs the handler
	post(`"a1b2c3"`, `{"item":"book"}`) // a retry: the stored answer
	post(`"a1b2c3"`, `{"item":"pen"}`)  // the key reused for another request
	post("", `{"item":"book"}`)         // no key
	fmt.Println("orders created:", orders)
	// Output:
	// 201  {"id":1,"item":"book"}
	// 201 true {"id":1,"item":"book"}
	// 422  {"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"this Idempotency-Key was already used for a different request","instance":"/orders"}
	// 400  {"type":"about:blank","title":"Bad Request","status":400,"detail":"this operation requires an Idempotency-Key header","instance":"/orders"}
	// orders created: 1
}
