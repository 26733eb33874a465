package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
)

// refreshWithRedsync is the job with redsync: a Mutex object, whose Lock
// tries 32 times, 50-250ms apart, by default; its 8s expiry is not
// renewed, so a job longer than that calls Extend itself.
func refreshWithRedsync(ctx context.Context, rdb redis.UniversalClient) error {
	rs := redsync.New(goredis.NewPool(rdb)) // one per process
	m := rs.NewMutex("report:daily", redsync.WithExpiry(10*time.Second))
	if err := m.LockContext(ctx); err != nil {
		return err // redsync.ErrFailed or *redsync.ErrTaken: busy after every try
	}
	defer m.UnlockContext(context.WithoutCancel(ctx))
	return refresh(ctx)
}

// padlockForRedsync is the same job with padlock: no mutex object, one
// attempt unless Options.Wait says how long to wait, and the lease is
// renewed while the lock is held.
func padlockForRedsync(ctx context.Context, locker *padlock.Locker) error {
	lk, err := locker.Acquire(ctx, "report:daily", padlock.Options{TTL: 10 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		return err // padlock.ErrNotAcquired: busy for the whole wait; padlock.ErrUnavailable: Redis down
	}
	defer lk.Release(context.WithoutCancel(ctx))
	return refresh(lk.Context(ctx)) // cancelled if the lock is lost
}

func compareRedsync(ctx context.Context, rdb redis.UniversalClient, locker *padlock.Locker) error {
	if err := refreshWithRedsync(ctx, rdb); err != nil {
		return err
	}
	if err := padlockForRedsync(ctx, locker); err != nil {
		return err
	}
	fmt.Println("the job ran under redsync, then under padlock")

	// The keys differ: redsync locks "report:daily" itself, padlock
	// "padlock:{report:daily}". Old and new code do not exclude each
	// other while both run.
	lk, err := locker.Acquire(ctx, "report:daily", padlock.Options{})
	if err != nil {
		return err
	}
	m := redsync.New(goredis.NewPool(rdb)).NewMutex("report:daily", redsync.WithTries(1))
	fmt.Println("redsync takes the key padlock holds:", m.TryLockContext(ctx) == nil)
	m.UnlockContext(ctx)

	// Zero Options are one attempt: a busy key answers at once, with the
	// holder's remaining lease.
	_, err = locker.Acquire(ctx, "report:daily", padlock.Options{})
	d, _ := padlock.RetryAfter(err)
	fmt.Printf("busy: %v; retry in about %v\n", errors.Is(err, padlock.ErrNotAcquired), d.Round(time.Second))

	// redsync's Valid and Until, padlock's TTL and ValidUntil.
	fmt.Printf("padlock's lock: %s; surely held for %v more\n", held(ctx, lk), time.Until(lk.ValidUntil()).Round(time.Second))
	return lk.Release(ctx)
}
