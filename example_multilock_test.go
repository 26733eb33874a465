package padlock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/padlockgo/padlock"
)

// A transfer between two accounts takes both accounts' locks, or neither.
// Callers may list the accounts in any order: AcquireAll sorts them, so
// two opposite transfers cannot deadlock.
func ExampleLocker_AcquireAll() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	m, err := locker.AcquireAll(ctx, []string{"account:B", "account:A"}, padlock.Options{})
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer m.Release(ctx)

	// Work under the set's context: it ends if any key is lost. Each key
	// has its own fence for the store that keeps that account.
	work := m.Context(ctx)
	_ = work
	fmt.Println("locked", m.Keys())
	fmt.Println("fence per key:", m.Fence("account:A") > 0, m.Fence("account:B") > 0)

	// Meanwhile nobody else gets any of the keys.
	_, err = locker.AcquireAll(ctx, []string{"account:A", "account:C"}, padlock.Options{})
	fmt.Println(err)
	// Output:
	// locked [account:A account:B]
	// fence per key: true true
	// padlock: not acquired: key "account:A" is held (holder's lease ends in 30s)
}
