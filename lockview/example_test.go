package lockview_test

import (
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockview"
)

// The lock page on an admin listener that only operators reach, beside
// the service's public one. AdminHosts answers only to localhost, IP
// addresses and the name operators use, so that no web page can read it
// through DNS rebinding.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
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
	_ = srv // go srv.ListenAndServe(), and srv.Shutdown at exit
}
