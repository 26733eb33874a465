package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// exampleRedis stands in for your Redis deployment so the examples run
// anywhere; use your own client instead.
func exampleRedis() (redis.UniversalClient, func()) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	return rdb, func() { rdb.Close(); m.Close() }
}

func ExampleLocker_Acquire() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lk, err := locker.Acquire(ctx, "order:42", padlock.Options{TTL: 10 * time.Second})
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer lk.Release(ctx)

	// Guard the work with the lock's context: it is cancelled if the lock
	// is lost. Pass the fence to the store so stale holders are rejected.
	work := lk.Context(ctx)
	_ = work
	fmt.Println("locked", lk.Key(), "with a fence:", lk.Fence() > 0)
	// Output: locked order:42 with a fence: true
}

func ExampleLocker_Acquire_wait() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	holder, _ := locker.Acquire(ctx, "job:nightly", padlock.Options{})
	go func() {
		time.Sleep(50 * time.Millisecond)
		holder.Release(ctx)
	}()

	// Wait up to two seconds for the holder to let go.
	lk, err := locker.Acquire(ctx, "job:nightly", padlock.Options{Wait: 2 * time.Second})
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer lk.Release(ctx)
	fmt.Println("got it after the holder released; fence rose:", lk.Fence() > holder.Fence())
	// Output: got it after the holder released; fence rose: true
}

func ExampleRetryAfter() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	holder, _ := locker.Acquire(ctx, "invoice:7", padlock.Options{TTL: 30 * time.Second})
	defer holder.Release(ctx)

	_, err = locker.Acquire(ctx, "invoice:7", padlock.Options{})
	if errors.Is(err, padlock.ErrNotAcquired) {
		d, _ := padlock.RetryAfter(err)
		fmt.Println("busy; retry in about", d.Round(10*time.Second))
	}
	// Output: busy; retry in about 30s
}

// Waiters of one Locker are served in arrival order, and a release hands
// the lock straight to the next of them: no Redis round trip, and the next
// fence.
func ExampleLock_Release_handOff() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	first, err := locker.Acquire(ctx, "report", padlock.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	next := make(chan *padlock.Lock)
	go func() {
		lk, err := locker.Acquire(ctx, "report", padlock.Options{Wait: 10 * time.Second})
		if err != nil {
			fmt.Println(err)
		}
		next <- lk
	}()
	time.Sleep(100 * time.Millisecond) // let it queue; then a second one behind it
	go func() {
		lk, err := locker.Acquire(ctx, "report", padlock.Options{Wait: 10 * time.Second})
		if err != nil {
			fmt.Println(err)
		}
		next <- lk
	}()
	time.Sleep(100 * time.Millisecond)

	first.Release(ctx) // back to Redis: no fences were reserved for waiters
	second := <-next
	second.Release(ctx) // handed on: one fence was reserved for the waiter behind
	third := <-next
	defer third.Release(ctx)
	fmt.Println("third holder's fence follows the second's:", third.Fence() == second.Fence()+1)
	// Output: third holder's fence follows the second's: true
}

func ExampleLimitAttempts() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	holder, _ := locker.Acquire(ctx, "report:daily", padlock.Options{})
	defer holder.Release(ctx)

	// Wait up to 10s for the key, but give up after two attempts: the
	// strategy's stop ends the wait, whatever is left of it.
	_, err = locker.Acquire(ctx, "report:daily", padlock.Options{
		Wait:  10 * time.Second,
		Retry: padlock.LimitAttempts(padlock.LinearBackoff(10*time.Millisecond), 2),
	})
	var na *padlock.NotAcquiredError
	if errors.As(err, &na) {
		fmt.Println("busy; gave up after", na.Attempts, "attempts")
	}
	// Output: busy; gave up after 2 attempts
}

// New takes LockerOptions: the shared options (WithDefaults, WithKeyPrefix,
// WithClockDrift) and WithReplicaAck. A Redlock-only option such as
// WithNodeTimeout does not compile here.
func ExampleNew() {
	rdb, stop := exampleRedis()
	defer stop()

	replicas := 0 // from configuration, say
	opts := []padlock.LockerOption{
		padlock.WithKeyPrefix("shop:"),
		padlock.WithDefaults(padlock.Options{TTL: 10 * time.Second}),
	}
	if replicas > 0 {
		opts = append(opts, padlock.WithReplicaAck(replicas, 500*time.Millisecond))
	}
	locker, err := padlock.New(rdb, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lk, err := locker.Acquire(ctx, "order:42", padlock.Options{})
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer lk.Release(ctx)
	fmt.Println(locker.RedisKey("order:42"), lk.Lease())
	// Output: shop:{order:42} 10s
}
