// Command migrating runs one job, written with a peer library and with
// padlock, side by side: the nightly report, refreshed by one instance at
// a time. docs/migrating.md is the guide it belongs to.
//
// Each peer's file holds the job both ways, then a few lines that show
// where the two libraries behave differently. redsync and redislock run
// on an in-process Redis (padlocktest), so nothing needs installing:
//
//	cd examples/migrating && go run . redsync redislock
//
// rueidislock needs a real Redis (7.0.5 or newer: client-side caching):
//
//	REDIS_ADDR=localhost:6379 go run . rueidislock
//
// This directory is a module of its own, so the peers never enter
// padlock's go.mod.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/padlocktest"
)

// refresh is the job: it stops when ctx ends.
func refresh(ctx context.Context) error {
	select {
	case <-time.After(50 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func main() {
	peers := os.Args[1:]
	if len(peers) == 0 {
		peers = []string{"redsync", "redislock", "rueidislock"}
	}
	env, err := padlocktest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer env.Close()
	ctx := context.Background()
	for _, p := range peers {
		fmt.Printf("== %s\n", p)
		switch p {
		case "redsync":
			err = compareRedsync(ctx, env.Client(), env.Locker())
		case "redislock":
			err = compareRedislock(ctx, env.Client(), env.Locker())
		case "rueidislock":
			err = compareRueidislock(ctx)
		default:
			err = fmt.Errorf("no peer %q: redsync, redislock or rueidislock", p)
		}
		if err != nil {
			log.Fatalf("%s: %v", p, err)
		}
	}
}

// held says whether lk is still held, as Redis sees it.
func held(ctx context.Context, lk *padlock.Lock) string {
	ttl, err := lk.TTL(ctx)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("held, %v left", ttl.Round(100*time.Millisecond))
}

// exists says whether Redis holds key.
func exists(ctx context.Context, rdb redis.UniversalClient, key string) bool {
	n, err := rdb.Exists(ctx, key).Result()
	return err == nil && n == 1
}
