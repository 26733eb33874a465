package idempotency_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/idempotency"
)

// A retried create on a net/http ServeMux gets the first answer back
// instead of a second order.
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

	type user struct{}
	// The authentication step in front leaves the user in the context.
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := context.WithValue(r.Context(), user{}, r.Header.Get("X-Demo-User"))
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	userID := func(r *http.Request) (string, error) {
		u, _ := r.Context().Value(user{}).(string)
		return u, nil
	}

	orders := 0
	idem := idempotency.New(locker, rdb, userID)
	mux := http.NewServeMux()
	mux.Handle("POST /orders", authenticate(idem(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, orders)
	}))))

	post := func(key string) {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"item":"book"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Demo-User", "alice")
		req.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	post(`"0b9c3a6e-4d8f-4f6a-9a57-2f1e0c7d5b21"`) // runs the handler
	post(`"0b9c3a6e-4d8f-4f6a-9a57-2f1e0c7d5b21"`) // a retry: the stored answer
	fmt.Println("orders created:", orders)
	// Output:
	// 201  {"id":1}
	// 201 true {"id":1}
	// orders created: 1
}
