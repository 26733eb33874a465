package padlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// TestAcquireAllServedAmongGrants: two processes pass key k back and
// forth (20 ms holds, each always waiting for it again), so every release
// of k grants it to the other's bid and k is never free. An AcquireAll of
// {k, j} in a third process, j free, waits for k as a single-key waiter
// does, takes its turn, and gets the set well within its wait, while the
// others go on taking k.
// Regression: it waited for k to be free, which grants never let happen,
// and gave up with ErrNotAcquired after 200 grants of k.
func TestAcquireAllServedAmongGrants(t *testing.T) {
	srv := redistest.Start(t)
	var lockers []*padlock.Locker
	for range 3 {
		l, err := padlock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lockers = append(lockers, l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg    sync.WaitGroup
		taken atomic.Int64
	)
	for _, l := range lockers[:2] {
		wg.Go(func() {
			for ctx.Err() == nil {
				lk, err := l.Acquire(ctx, "k", padlock.Options{Wait: 10 * time.Second})
				if err != nil {
					continue
				}
				taken.Add(1)
				time.Sleep(20 * time.Millisecond)
				_ = lk.Release(context.Background())
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	for taken.Load() < 10 {
		time.Sleep(5 * time.Millisecond)
	}
	before := taken.Load()
	began := time.Now()
	m, err := lockers[2].AcquireAll(ctx, []string{"k", "j"}, padlock.Options{Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("AcquireAll of {k, j}: %v (k taken %d times meanwhile): it was not served among the grants of k", err, taken.Load()-before)
	}
	t.Logf("AcquireAll served %v after it was called, k taken %d times meanwhile", time.Since(began), taken.Load()-before)
	if err := m.Err(); err != nil {
		t.Fatalf("the set ended at once: %v", err)
	}
	if f := m.Fence("k"); f <= 0 {
		t.Fatalf("fence of k %d", f)
	}
	if err := m.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The others go on taking k after the set let it go.
	after := taken.Load()
	deadline := time.Now().Add(5 * time.Second)
	for taken.Load() == after {
		if time.Now().After(deadline) {
			t.Fatal("k was not taken again within 5s of the set's release")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
