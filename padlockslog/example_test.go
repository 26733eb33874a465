package padlockslog_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/padlockslog"
)

// Lost locks and failed renewals in the service's log, keys hashed under
// the service's secret, so that every instance logs one key with one hash.
func ExampleNew() {
	mr := miniredis.NewMiniRedis() // stands in for a real Redis here
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	redactor, err := lockkey.NewRedactor(lockkey.WithRedactSecret([]byte("the service's secret, from its store")))
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		// Only to keep this example's output the same on every run.
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "held" || a.Key == "fence" {
				return slog.Attr{}
			}
			return a
		},
	}))
	l, err := padlock.New(rdb, padlock.WithObserver(padlockslog.New(logger, padlockslog.WithRedactor(redactor))))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx := context.Background()
	lk, err := l.Acquire(ctx, "order:42", padlock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	mr.Del(l.RedisKey("order:42")) // the lock taken away, as an operator's DEL would
	fmt.Println("Extend:", lk.Extend(ctx, time.Minute))
	// Output:
	// level=WARN msg="padlock: lock lost" key_hash=ef1321a9935d namespace=order cause=token_gone
	// Extend: padlock: lock not held
}
