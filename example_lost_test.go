package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
)

// Hand the lock's context to the work it guards: when the lock is lost,
// the context is cancelled with cause ErrLockLost, and the work stops
// instead of going on as if it still held the lock.
func ExampleLock_Context() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lk, err := locker.Acquire(ctx, "report:7", padlock.Options{})
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer lk.Release(ctx)

	work := lk.Context(ctx)
	stopped := make(chan error)
	go func() {
		for {
			select {
			case <-work.Done():
				stopped <- context.Cause(work)
				return
			case <-time.After(10 * time.Millisecond):
				// one step of the guarded work
			}
		}
	}()

	// Take the lock away, as an operator's DEL would, or a lease that ran
	// out while the holder was paused. The next renewal or Extend finds
	// the owner token gone.
	rdb.Del(ctx, "padlock:{report:7}")
	fmt.Println("Extend:", lk.Extend(ctx, 30*time.Second))

	select {
	case cause := <-stopped:
		fmt.Println("work stopped, lock lost:", errors.Is(cause, padlock.ErrLockLost))
	case <-time.After(10 * time.Second):
		fmt.Println("the work did not stop")
	}
	// Output:
	// Extend: padlock: lock not held
	// work stopped, lock lost: true
}

// Done closes when the watchdog finds the lock gone, without any call from
// the holder; Err then says the lock was lost rather than released.
func ExampleLock_Done() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	// A short lease, renewed every TTL/3, so the loss is seen quickly.
	lk, err := locker.Acquire(ctx, "export:nightly", padlock.Options{TTL: 300 * time.Millisecond})
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer lk.Release(ctx)

	rdb.Del(ctx, "padlock:{export:nightly}")

	select {
	case <-lk.Done():
		fmt.Println(lk.Err())
	case <-time.After(10 * time.Second):
		fmt.Println("the loss went unnoticed")
	}
	// Output: padlock: lock lost
}

// fencedStore is a store that takes writes only from the newest lock
// holder: a write carrying a fence lower than the highest it has accepted
// comes from a holder that has been superseded.
type fencedStore struct {
	mu     sync.Mutex
	fences map[string]int64 // highest fence accepted, per key
	values map[string]string
}

var errStaleFence = errors.New("store: stale fence")

func (s *fencedStore) Write(key, value string, fence int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.fences[key] {
		return fmt.Errorf("%w: %d < %d", errStaleFence, fence, s.fences[key])
	}
	s.fences[key] = fence
	s.values[key] = value
	return nil
}

// Pass the fence with every write the lock protects, and let the store
// reject older fences. A holder that lost its lock without noticing (a
// long pause, a lease that ran out) cannot then overwrite the work of the
// holder that came after it.
func ExampleLock_Fence() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()
	store := &fencedStore{fences: map[string]int64{}, values: map[string]string{}}

	first, err := locker.Acquire(ctx, "account:9", padlock.Options{})
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer first.Release(ctx)

	// The first holder stalls; its lease runs out (here: the key is
	// deleted by hand) and another process takes the lock.
	rdb.Del(ctx, "padlock:{account:9}")
	elsewhere, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer elsewhere.Close()
	second, err := elsewhere.Acquire(ctx, "account:9", padlock.Options{})
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	defer second.Release(ctx)
	fmt.Println("second holder writes:", store.Write("account:9", "balance=90", second.Fence()))

	// The first holder wakes up and writes without checking its lock.
	err = store.Write("account:9", "balance=100", first.Fence())
	fmt.Println("first holder's late write rejected:", errors.Is(err, errStaleFence))
	fmt.Println("stored:", store.values["account:9"])
	// Output:
	// second holder writes: <nil>
	// first holder's late write rejected: true
	// stored: balance=90
}

// Extend resets the lease to a new length from now, and later renewals
// keep that length. On a lock that is no longer held it returns
// ErrNotHeld and changes nothing.
func ExampleLock_Extend() {
	rdb, stop := exampleRedis()
	defer stop()
	locker, err := padlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	// A fixed 10s lease for a job that usually finishes in time.
	lk, err := locker.Acquire(ctx, "import:42", padlock.Options{TTL: 10 * time.Second, NoRenew: true})
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}

	// The job turns out to be large: ask for a minute from now.
	if err := lk.Extend(ctx, time.Minute); err != nil {
		fmt.Println("extend:", err)
		return
	}
	ttl, err := lk.TTL(ctx)
	if err != nil {
		fmt.Println("ttl:", err)
		return
	}
	fmt.Println("lease now about", ttl.Round(time.Minute))

	lk.Release(ctx)
	err = lk.Extend(ctx, time.Minute)
	fmt.Println("after Release:", errors.Is(err, padlock.ErrNotHeld))
	// Output:
	// lease now about 1m0s
	// after Release: true
}
