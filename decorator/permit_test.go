package decorator_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/decorator"
)

type call struct{ merchant string }

func merchantKey(c call) (string, error) { return "merchant:" + c.merchant, nil }

// Many concurrent calls for one merchant through a 2-permit semaphore:
// never more than 2 inside at once, and all of them run (they wait).
func TestWithPermitCapsConcurrency(t *testing.T) {
	l, _ := newLocker(t)
	sem, err := l.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	var inside, most atomic.Int64
	pay := decorator.WithPermit(sem, merchantKey, padlock.Options{Wait: 20 * time.Second},
		func(ctx context.Context, c call) (string, error) {
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(10 * time.Millisecond)
			inside.Add(-1)
			return "paid " + c.merchant, nil
		})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if got, err := pay(context.Background(), call{"m1"}); err != nil || got != "paid m1" {
				t.Errorf("pay: got %q, %v; want paid m1", got, err)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m != 2 {
		t.Errorf("most calls at once: got %d, want 2", m)
	}
}

// With every permit taken a call without Wait fails at once with
// ErrNotAcquired, and a decorated function that calls itself under its
// permit runs under that permit instead of waiting for a second one.
func TestWithPermitFullAndReentrant(t *testing.T) {
	l, _ := newLocker(t)
	sem, err := l.Semaphore(1)
	if err != nil {
		t.Fatal(err)
	}
	pay := decorator.WithPermit(sem, merchantKey, padlock.Options{Wait: time.Second},
		func(ctx context.Context, c call) (int, error) {
			if err := decorator.DoPermit(ctx, sem, "merchant:"+c.merchant, padlock.Options{}, func(context.Context) error { return nil }); err != nil {
				return 0, err
			}
			return 1, nil
		})
	if n, err := pay(context.Background(), call{"m1"}); err != nil || n != 1 {
		t.Fatalf("nested call under one permit: got %d, %v; want 1, nil", n, err)
	}
	held, err := sem.Acquire(context.Background(), "merchant:m1", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	full := decorator.WithPermit(sem, merchantKey, padlock.Options{},
		func(context.Context, call) (int, error) { return 1, nil })
	if _, err := full(context.Background(), call{"m1"}); !errors.Is(err, padlock.ErrNotAcquired) {
		t.Errorf("with every permit taken: got %v, want ErrNotAcquired", err)
	}
}
