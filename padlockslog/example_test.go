package padlockslog_test

import (
	"log"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/padlockslog"
)

// Lost locks and failed renewals in the service's log, keys hashed.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	l, err := padlock.New(rdb, padlock.WithObserver(padlockslog.New(logger)))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
}
