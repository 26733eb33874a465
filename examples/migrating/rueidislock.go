package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/padlockgo/padlock"
)

// refreshWithRueidislock is the job with rueidislock: WithContext waits
// until the lock is taken or ctx ends, and returns a context that ends if
// the lock is lost; the 5s KeyValidity is extended every 2.5s meanwhile.
func refreshWithRueidislock(ctx context.Context, locker rueidislock.Locker) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // the wait: there is no other bound
	defer cancel()
	lctx, unlock, err := locker.WithContext(ctx, "report:daily")
	if err != nil {
		return err // the context's error when the wait ended; rueidislock.ErrLockerClosed
	}
	defer unlock()
	return refresh(lctx) // lctx ends if the lock is lost (and when ctx does)
}

// padlockForRueidislock is the same job with padlock: the wait is
// Options.Wait, and the lock outlives the wait: its context is
// Lock.Context's.
func padlockForRueidislock(ctx context.Context, locker *padlock.Locker) error {
	lk, err := locker.Acquire(ctx, "report:daily", padlock.Options{Wait: 5 * time.Second})
	if err != nil {
		return err // padlock.ErrNotAcquired: busy for the whole wait
	}
	defer lk.Release(context.WithoutCancel(ctx))
	return refresh(lk.Context(ctx)) // cancelled if the lock is lost
}

func compareRueidislock(ctx context.Context) error {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		fmt.Println("skipped: rueidislock needs a real Redis; set REDIS_ADDR")
		return nil
	}
	rl, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:  1, // one key per lock, on one Redis; the default 2 keeps 3
	})
	if err != nil {
		return err
	}
	defer rl.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker, err := padlock.New(rdb)
	if err != nil {
		return err
	}
	defer locker.Close()

	if err := refreshWithRueidislock(ctx, rl); err != nil {
		return err
	}
	if err := padlockForRueidislock(ctx, locker); err != nil {
		return err
	}
	fmt.Println("the job ran under rueidislock, then under padlock")

	// Keys: rueidislock's are "rueidislock:<i>:report:daily", padlock's
	// "padlock:{report:daily}": old and new code do not see each other.
	_, unlock, err := rl.TryWithContext(ctx, "report:daily")
	if err != nil {
		return err
	}
	fmt.Println("rueidislock's key is rueidislock:0:report:daily:", exists(ctx, rdb, "rueidislock:0:report:daily"))
	lk, err := locker.Acquire(ctx, "report:daily", padlock.Options{})
	if err != nil {
		return err
	}
	fmt.Println("padlock takes the key rueidislock holds")

	// Busy: TryWithContext says ErrNotLocked; padlock's ErrNotAcquired
	// says how long the holder still has.
	_, _, err = rl.TryWithContext(ctx, "report:daily")
	fmt.Println("rueidislock, busy key:", err)
	unlock()
	_, err = locker.Acquire(ctx, "report:daily", padlock.Options{})
	d, _ := padlock.RetryAfter(err)
	fmt.Printf("padlock, busy key: %v, retry in about %v\n", errors.Is(err, padlock.ErrNotAcquired), d.Round(time.Second))
	return lk.Release(ctx)
}
