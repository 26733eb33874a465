package padlockotel_test

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/padlockotel"
)

// A Locker that reports to the global OpenTelemetry providers (set them
// with otel.SetTracerProvider and otel.SetMeterProvider at start-up).
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	obs, err := padlockotel.New()
	if err != nil {
		log.Fatal(err)
	}
	l, err := padlock.New(rdb, padlock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
}
