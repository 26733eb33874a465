package lockview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockview"
)

// The lock page on an admin listener that only operators reach, beside
// the service's public one. AdminHosts answers only to localhost, IP
// addresses and the name operators use, so that no web page can read it
// through DNS rebinding.
func ExampleNew() {
	mr := miniredis.NewMiniRedis() // stands in for a real Redis here
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	rec := lockview.NewRecorder()
	l, err := padlock.New(rdb, padlock.WithObserver(rec))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	view, err := lockview.New(l, lockview.Config{Authorize: lockview.AdminListener, Recorder: rec})
	if err != nil {
		log.Fatal(err)
	}
	admin := http.NewServeMux()
	admin.Handle("GET /debug/locks", view)
	srv := &http.Server{Addr: "127.0.0.1:6060", Handler: lockview.AdminHosts("locks.internal.example")(admin)}
	// go srv.ListenAndServe(), and srv.Shutdown at exit; here, two
	// requests straight to its handler.

	ctx := context.Background()
	lk, err := l.Acquire(ctx, "order:42", padlock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	w := httptest.NewRecorder()
	srv.Handler.ServeHTTP(w, httptest.NewRequest("GET", "http://locks.internal.example/debug/locks?format=json", nil))
	var s lockview.Snapshot
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
		log.Fatal(err)
	}
	for _, h := range s.Held {
		fmt.Println(w.Code, "held:", h.Namespace, "key shown:", h.Key.Key != "")
	}
	w = httptest.NewRecorder()
	srv.Handler.ServeHTTP(w, httptest.NewRequest("GET", "http://attacker.example/debug/locks", nil))
	fmt.Println(w.Code, "for another Host")
	// Output:
	// 200 held: order key shown: false
	// 421 for another Host
}
