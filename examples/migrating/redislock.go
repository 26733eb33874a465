package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
)

// refreshWithRedislock is the job with redislock: Obtain makes one
// attempt unless given a RetryStrategy, and the lease is fixed: a job
// longer than its TTL calls Refresh itself.
func refreshWithRedislock(ctx context.Context, rdb redis.UniversalClient) error {
	locker := redislock.New(rdb)
	lk, err := locker.Obtain(ctx, "report:daily", 10*time.Second, &redislock.Options{
		RetryStrategy: redislock.LimitRetry(redislock.LinearBackoff(100*time.Millisecond), 50),
	})
	if err != nil {
		return err // redislock.ErrNotObtained: busy after every retry
	}
	defer lk.Release(context.WithoutCancel(ctx))
	return refresh(ctx)
}

// padlockForRedislock is the same job with padlock: Wait is the retry
// budget, as a duration; the lease is renewed while the lock is held.
func padlockForRedislock(ctx context.Context, locker *padlock.Locker) error {
	lk, err := locker.Acquire(ctx, "report:daily", padlock.Options{TTL: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		return err // padlock.ErrNotAcquired: busy for the whole wait
	}
	defer lk.Release(context.WithoutCancel(ctx))
	return refresh(lk.Context(ctx)) // cancelled if the lock is lost
}

func compareRedislock(ctx context.Context, rdb redis.UniversalClient, locker *padlock.Locker) error {
	if err := refreshWithRedislock(ctx, rdb); err != nil {
		return err
	}
	if err := padlockForRedislock(ctx, locker); err != nil {
		return err
	}
	fmt.Println("the job ran under redislock, then under padlock")

	// Expiry against renewal: two 1s locks, neither released.
	old, err := redislock.Obtain(ctx, rdb, "report:weekly", time.Second, nil)
	if err != nil {
		return err
	}
	lk, err := locker.Acquire(ctx, "report:weekly", padlock.Options{TTL: time.Second})
	if err != nil {
		return err
	}
	time.Sleep(1500 * time.Millisecond)
	ttl, err := old.TTL(ctx)
	fmt.Printf("1.5s later: redislock's 1s lock has %v left (err %v); padlock's is %s\n", ttl, err, held(ctx, lk))
	if err := old.Refresh(ctx, time.Second, nil); errors.Is(err, redislock.ErrNotObtained) {
		fmt.Println("redislock's Refresh of the expired lock:", err)
	}

	// Extend: padlock's resets the lease and keeps that lease for later
	// renewals; a lock already gone is ErrNotHeld, never taken again.
	if err := lk.Extend(ctx, 5*time.Second); err != nil {
		return err
	}
	fmt.Println("after Extend(5s):", held(ctx, lk))
	if err := lk.Release(ctx); err != nil {
		return err
	}
	fmt.Println("Extend after Release:", lk.Extend(ctx, time.Second))
	return nil
}
