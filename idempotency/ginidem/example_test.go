package ginidem_test

import (
	"fmt"
	"log"
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
	"github.com/padlockgo/padlock/middleware"
)

// A retried create gets the first answer back instead of a second order;
// the same key with another body is refused; another caller's same key is
// its own. The middleware goes after authentication.
func ExampleNew() {
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

	// The authentication step in front: gin.BasicAuth here, which leaves
	// the user under gin.AuthUserKey. The middleware scopes keys by it.
	auth := gin.BasicAuth(gin.Accounts{"alice": "alice-secret", "bob": "bob-secret"})
	user := func(c *gin.Context) (string, error) { return c.GetString(gin.AuthUserKey), nil }

	r := gin.New()
	r.POST("/orders", auth, ginidem.New(locker, rdb, user), create)

	post := func(who, key, body string) {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(who, who+"-secret")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	const key = `"0b9c3a6e-4d8f-4f6a-9a57-2f1e0c7d5b21"` // a random UUID per operation

	post("alice", key, `{"item":"book"}`) // runs the handler
	post("alice", key, `{"item":"book"}`) // a retry: the stored answer
	post("alice", key, `{"item":"pen"}`)  // the key reused for another request
	post("bob", key, `{"item":"book"}`)   // another caller's key space: runs
	post("alice", "", `{"item":"book"}`)  // no key
	fmt.Println("orders created:", orders)
	// Output:
	// 201  {"id":1,"item":"book"}
	// 201 true {"id":1,"item":"book"}
	// 422  {"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"this Idempotency-Key was already used for a different request","instance":"/orders"}
	// 201  {"id":2,"item":"book"}
	// 400  {"type":"about:blank","title":"Bad Request","status":400,"detail":"this operation requires an Idempotency-Key header","instance":"/orders"}
	// orders created: 2
}

// The Gin stack in its safe order: authentication, then idempotency, then
// the order's lock, then the handler. A retry replays the first answer
// without taking the lock or running the handler; two payments of one
// order never run at once; a request with no caller never reaches either
// (ginidem refuses it with 401: idempotency needs an authenticated
// caller). One middleware.Caller serves both faces.
func ExampleNew_withLock() {
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

	// The authentication step: it sets the caller when the credentials
	// check out, and lets the request on either way (say the route is
	// public with a session, private without), so the rest must refuse
	// an anonymous request itself.
	auth := func(c *gin.Context) {
		if who, pass, ok := c.Request.BasicAuth(); ok && pass == who+"-secret" {
			c.Set(gin.AuthUserKey, who)
		}
	}
	// The caller authentication found, "" for none: one func for both faces.
	var user middleware.Caller = func(c *gin.Context) (string, error) {
		return c.GetString(gin.AuthUserKey), nil
	}

	payments := 0
	pay := func(c *gin.Context) {
		payments++
		c.JSON(http.StatusOK, gin.H{"payment": payments, "lock": middleware.LockFrom(c).Key()})
	}

	r := gin.New()
	r.POST("/orders/:id/pay",
		auth,                           // 1. who calls
		ginidem.New(locker, rdb, user), // 2. a retry gets the first answer back; no caller, 401
		middleware.Lock(locker, keyfunc.Param("id", lockkey.Int(64)),
			middleware.WithCallerFrom(user)), // 3. one payment of an order at a time
		pay) // 4. the handler, holding the lock

	post := func(who, key string) {
		req := httptest.NewRequest("POST", "/orders/42/pay", nil)
		if who != "" {
			req.SetBasicAuth(who, who+"-secret")
		}
		req.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	post("alice", `"k1"`) // pays
	post("alice", `"k1"`) // a retry: the stored answer, no second payment
	post("", `"k2"`)      // no caller: refused before the lock
	fmt.Println("payments:", payments)
	// Output:
	// 200  {"lock":"/orders/$id/pay:42","payment":1}
	// 200 true {"lock":"/orders/$id/pay:42","payment":1}
	// 401  {"type":"about:blank","title":"Unauthorized","status":401,"detail":"this operation requires an authenticated caller","instance":"/orders/42/pay"}
	// payments: 1
}
