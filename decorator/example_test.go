package decorator_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
	"github.com/padlockgo/padlock/lockkey"
)

// exampleLocker returns a Locker on an in-process miniredis, which stands in
// for a real Redis in these examples, and a func that closes it all.
func exampleLocker() (*padlock.Locker, func()) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	return locker, func() {
		locker.Close()
		rdb.Close()
		mr.Close()
	}
}

type PayRequest struct {
	OrderID string
	Cents   int64
}

// A payment function that never runs twice at once for the same order,
// across every process sharing the Redis. The key comes from the argument;
// the fence from the context goes to the store.
func ExampleWithLock() {
	locker, closeAll := exampleLocker()
	defer closeAll()

	pay := decorator.WithLock(locker,
		lockkey.Arg("order", func(r PayRequest) string { return r.OrderID }),
		padlock.Options{Wait: 2 * time.Second},
		func(ctx context.Context, r PayRequest) (string, error) {
			lk := padlock.FromContext(ctx) // ctx is cancelled if the lock is lost
			// store.Pay(ctx, r.OrderID, lk.Fence()) would go here.
			return fmt.Sprintf("paid %d cents holding %s, fenced: %v", r.Cents, lk.Key(), lk.Fence() > 0), nil
		})

	receipt, err := pay(context.Background(), PayRequest{OrderID: "42", Cents: 1299})
	fmt.Println(receipt, err)
	// Output:
	// paid 1299 cents holding order:42, fenced: true <nil>
}

// Decorated functions that call each other on the same key share the lock
// through the context instead of deadlocking.
func ExampleWithLockErr() {
	locker, closeAll := exampleLocker()
	defer closeAll()

	byID := lockkey.Arg("order", func(id string) string { return id })
	reserve := decorator.WithLockErr(locker, byID, padlock.Options{}, func(ctx context.Context, id string) error {
		fmt.Println("reserving stock for", id)
		return nil
	})
	ship := decorator.WithLockErr(locker, byID, padlock.Options{}, func(ctx context.Context, id string) error {
		if err := reserve(ctx, id); err != nil { // reentrant: same key, same ctx
			return err
		}
		fmt.Println("shipping", id)
		return nil
	})

	fmt.Println(ship(context.Background(), "42"))
	// Output:
	// reserving stock for 42
	// shipping 42
	// <nil>
}

// Do runs a closure once, now. While someone else holds the key it does not
// run, and the error says so.
func ExampleDo() {
	locker, closeAll := exampleLocker()
	defer closeAll()
	ctx := context.Background()

	key, _ := lockkey.Join("report", "daily")
	build := func(ctx context.Context) error {
		fmt.Println("building the report")
		return nil
	}

	other, _ := locker.Acquire(ctx, key, padlock.Options{}) // another worker
	err := decorator.Do(ctx, locker, key, padlock.Options{}, build)
	fmt.Println(errors.Is(err, padlock.ErrNotAcquired))

	other.Release(ctx)
	err = decorator.Do(ctx, locker, key, padlock.Options{}, build)
	fmt.Println(err)
	// Output:
	// true
	// building the report
	// <nil>
}

// Hooks log, in one place, the calls that did not run for want of the lock
// and the releases that failed, which a call's result may not show.
func ExampleWithAcquireError() {
	locker, closeAll := exampleLocker()
	defer closeAll()

	logBusy := decorator.WithAcquireError(func(_ context.Context, key string, err error) {
		fmt.Printf("not run on %s: %v\n", key, errors.Is(err, padlock.ErrNotAcquired))
	})
	logRelease := decorator.WithReleaseError(func(_ context.Context, key string, err error) {
		fmt.Printf("release of %s failed: %v\n", key, err)
	})
	report := decorator.WithLockErr(locker, lockkey.Arg("report", func(day string) string { return day }),
		padlock.Options{}, func(_ context.Context, day string) error {
			// Another caller (a context without this lock) for the same day
			// while this run holds it:
			return decorator.Do(context.Background(), locker, "report:"+day, padlock.Options{},
				func(context.Context) error { return nil }, logBusy, logRelease)
		}, logBusy, logRelease)

	fmt.Println(errors.Is(report(context.Background(), "2026-11-23"), padlock.ErrNotAcquired))
	// Output:
	// not run on report:2026-11-23: true
	// true
}
