package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/padlockgo/padlock"
)

func ExampleLocker_AcquireRead() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	// Readers share the lock.
	r1, _ := locker.AcquireRead(ctx, "catalog", padlock.Options{})
	r2, err := locker.AcquireRead(ctx, "catalog", padlock.Options{})
	fmt.Println("two readers:", err == nil)

	// A writer waits for them; while it waits, new readers wait too, so
	// readers cannot starve it.
	go func() {
		time.Sleep(50 * time.Millisecond)
		r1.Release(ctx)
		r2.Release(ctx)
	}()
	w, err := locker.AcquireWrite(ctx, "catalog", padlock.Options{Wait: 5 * time.Second})
	fmt.Println("writer after the readers:", err == nil)

	// The writer's context carries the lock: it may read what it writes,
	// without a round trip and without waiting for itself.
	wctx := w.Context(ctx)
	r, err := locker.AcquireRead(wctx, "catalog", padlock.Options{})
	fmt.Println("the writer reads:", err == nil, r.Fence() == w.Fence())
	r.Release(ctx)

	_, err = locker.AcquireRead(ctx, "catalog", padlock.Options{})
	fmt.Println("another reader while it writes:", errors.Is(err, padlock.ErrNotAcquired))
	w.Release(ctx)
	// Output:
	// two readers: true
	// writer after the readers: true
	// the writer reads: true true
	// another reader while it writes: true
}
