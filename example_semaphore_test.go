package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/padlockgo/padlock"
)

func ExampleSemaphore() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	// At most 3 calls at once to the payment provider, per merchant,
	// across every process that shares this Redis.
	provider, err := locker.Semaphore(3)
	if err != nil {
		panic(err)
	}
	var permits []*padlock.Lock
	for range 3 {
		p, err := provider.Acquire(ctx, "merchant:7", padlock.Options{})
		if err != nil {
			panic(err)
		}
		permits = append(permits, p)
	}
	_, err = provider.Acquire(ctx, "merchant:7", padlock.Options{})
	fmt.Println("a fourth call:", errors.Is(err, padlock.ErrNotAcquired))

	// Another merchant has permits of its own.
	other, err := provider.Acquire(ctx, "merchant:8", padlock.Options{})
	fmt.Println("another merchant:", err == nil)
	other.Release(ctx)

	// A waiting Acquire sleeps until a holder gives its permit back.
	go func() {
		time.Sleep(50 * time.Millisecond)
		permits[0].Release(ctx)
	}()
	p, err := provider.Acquire(ctx, "merchant:7", padlock.Options{Wait: 5 * time.Second})
	fmt.Println("after waiting:", err == nil)
	p.Release(ctx)
	for _, p := range permits[1:] {
		p.Release(ctx)
	}
	// Output:
	// a fourth call: true
	// another merchant: true
	// after waiting: true
}

func ExampleSemaphore_SetPermits() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	sem, _ := locker.Semaphore(2)
	a, _ := sem.Acquire(ctx, "export", padlock.Options{})
	b, _ := sem.Acquire(ctx, "export", padlock.Options{})

	// Shrinking evicts nobody: both holders keep their permits, and
	// nobody new gets in until fewer than 1 hold.
	_ = sem.SetPermits(1)
	fmt.Println("holders keep theirs:", a.Err() == nil && b.Err() == nil)
	a.Release(ctx)
	_, err = sem.Acquire(ctx, "export", padlock.Options{})
	fmt.Println("one left, bound 1:", errors.Is(err, padlock.ErrNotAcquired))
	b.Release(ctx)
	c, err := sem.Acquire(ctx, "export", padlock.Options{})
	fmt.Println("none left:", err == nil)
	c.Release(ctx)
	// Output:
	// holders keep theirs: true
	// one left, bound 1: true
	// none left: true
}
