package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/padlockgo/padlock"
)

// printer is an Observer that prints how each Acquire ended and each
// release. It embeds NopObserver, so it implements only the events it
// needs.
type printer struct{ padlock.NopObserver }

func (printer) AcquireEnd(_ context.Context, e padlock.AcquireEndEvent) {
	fmt.Println("acquire", e.Key+":", e.Outcome)
}

func (printer) LockReleased(e padlock.LockReleasedEvent) {
	fmt.Println("released", e.Key)
}

// An Observer hears every Acquire, release, renewal and loss of the
// Locker's locks, on the goroutine where each happens: padlockotel,
// padlockslog and lockview are ready-made ones, and JoinObservers
// combines them. Locker.Held lists the locks held now.
func ExampleWithObserver() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb, padlock.WithObserver(printer{}))
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
	_, err = locker.Acquire(ctx, "order:42", padlock.Options{})
	fmt.Println("second Acquire busy:", errors.Is(err, padlock.ErrNotAcquired))
	for _, h := range locker.Held() {
		fmt.Println("held:", h.Key, "renewed:", h.Renew)
	}
	lk.Release(ctx)
	// Output:
	// acquire order:42: acquired
	// acquire order:42: busy
	// second Acquire busy: true
	// held: order:42 renewed: true
	// released order:42
}

// counter is an Observer that counts the locks taken.
type counter struct {
	padlock.NopObserver
	taken int
}

func (c *counter) AcquireEnd(_ context.Context, e padlock.AcquireEndEvent) {
	if e.Outcome.Held() {
		c.taken++
	}
}

// Several observers on one Locker, each told every event in turn: the
// example app joins padlockslog, padlockotel and the lock page's
// Recorder so.
func ExampleJoinObservers() {
	rdb, stop := exampleRedis()
	defer stop()
	taken := &counter{}
	locker, err := padlock.New(rdb, padlock.WithObserver(padlock.JoinObservers(printer{}, taken)))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	for _, key := range []string{"order:1", "order:2"} {
		lk, err := locker.Acquire(ctx, key, padlock.Options{})
		if err != nil {
			fmt.Println("not locked:", err)
			return
		}
		lk.Release(ctx)
	}
	fmt.Println("locks taken:", taken.taken)
	// Output:
	// acquire order:1: acquired
	// released order:1
	// acquire order:2: acquired
	// released order:2
	// locks taken: 2
}
