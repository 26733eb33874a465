package decorator_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
	"github.com/padlockgo/padlock/lockkey"
)

// At most 2 calls at once to the payment provider per merchant, across
// every process sharing the Redis: a third finds every permit taken.
func ExampleWithPermit() {
	locker, closeAll := exampleLocker()
	defer closeAll()
	ctx := context.Background()
	provider, _ := locker.Semaphore(2)

	charge := decorator.WithPermit(provider,
		lockkey.Arg("merchant", func(merchant string) string { return merchant }),
		padlock.Options{}, // no waiting: a full merchant fails at once
		func(ctx context.Context, merchant string) (string, error) {
			return "charged via " + merchant, nil
		})

	key, _ := lockkey.Join("merchant", "acme")
	a, _ := provider.Acquire(ctx, key, padlock.Options{}) // two calls under way
	b, _ := provider.Acquire(ctx, key, padlock.Options{})
	_, err := charge(ctx, "acme")
	fmt.Println("third call:", errors.Is(err, padlock.ErrNotAcquired))

	a.Release(ctx)
	fmt.Println(charge(ctx, "acme"))
	b.Release(ctx)
	// Output:
	// third call: true
	// charged via acme <nil>
}
