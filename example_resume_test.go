package padlock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/padlockgo/padlock"
)

// A lock taken when a job is queued and released by the worker that runs
// it: the queueing side detaches the lock and sends its Ownership with the
// job; the worker resumes it, and its Locker renews it while it works.
func ExampleLocker_Resume() {
	rdb, stop := exampleRedis()
	defer stop()
	queuer, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer queuer.Close()
	worker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer worker.Close()
	ctx := context.Background()

	// Queueing: the lease must cover the time until a worker resumes it.
	lk, err := queuer.Acquire(ctx, "report:2026-11", padlock.Options{TTL: time.Minute})
	if err != nil {
		fmt.Println("busy:", err)
		return
	}
	own, _ := lk.Detach()
	job, _ := json.Marshal(own) // goes into the job queue

	// The worker.
	var got padlock.Ownership
	_ = json.Unmarshal(job, &got)
	held, err := worker.Resume(ctx, got, padlock.Options{TTL: 30 * time.Second})
	if err != nil {
		fmt.Println("lost before the worker came:", err)
		return
	}
	defer held.Release(ctx)
	fmt.Println("worker holds", held.Key(), "with the queuer's fence:", held.Fence() == lk.Fence())
	// Output: worker holds report:2026-11 with the queuer's fence: true
}

// Lease and ValidUntil answer without asking Redis: how long the lock's
// lease is, and until when the lock is surely held (its lost signal fires
// then unless a renewal moves it on).
func ExampleLock_ValidUntil() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lk, err := locker.Acquire(ctx, "invoice:7", padlock.Options{TTL: 10 * time.Second})
	if err != nil {
		fmt.Println("busy:", err)
		return
	}
	defer lk.Release(ctx)
	left := time.Until(lk.ValidUntil())
	fmt.Println("lease:", lk.Lease(), "surely held for most of it:", left > 9*time.Second && left <= 10*time.Second)
	// Output: lease: 10s surely held for most of it: true
}

// RedisKey names the key a lock lives under, for tools and tests that look
// at Redis directly.
func ExampleLocker_RedisKey() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb, padlock.WithKeyPrefix("shop:"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lk, err := locker.Acquire(ctx, "order:42", padlock.Options{})
	if err != nil {
		fmt.Println("busy:", err)
		return
	}
	defer lk.Release(ctx)
	owner, _ := rdb.Get(ctx, locker.RedisKey("order:42")).Result()
	fmt.Println(locker.RedisKey("order:42"), "holds the lock's token:", strings.HasPrefix(owner, lk.Token()))
	// Output: shop:{order:42} holds the lock's token: true
}
