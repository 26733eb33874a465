package padlocktest_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/padlocktest"
	"github.com/padlockgo/padlock/schedule"
)

// TestClockDrivesEvery: three instances of a service run one job every
// minute with schedule.Every on the Env's Clock; ten moves of the Clock
// run the job ten times, once per tick, on one instance at a time, each
// run for its own tick, and no minute passes for real.
func TestClockDrivesEvery(t *testing.T) {
	env := padlocktest.New(t, padlocktest.WithManualClock())
	clock := env.Clock()
	start := clock.Now()
	const instances, ticks = 3, 10

	var (
		mu      sync.Mutex
		ran     []time.Time // the tick of each run
		running atomic.Int32
		overlap atomic.Bool
	)
	job := func(ctx context.Context) error {
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		defer running.Add(-1)
		tick, _ := schedule.Tick(ctx)
		mu.Lock()
		ran = append(ran, tick)
		mu.Unlock()
		return nil
	}
	o := schedule.Options{Clock: clock, OnError: func(err error) { t.Errorf("tick: %v", err) }}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range instances {
		l := env.Locker()
		if i > 0 { // another instance of the service, on the same Redis
			var err error
			if l, err = padlock.New(env.Client()); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
		}
		wg.Go(func() {
			if err := schedule.Every(ctx, l, "job:settle", time.Minute, o, job); !errors.Is(err, context.Canceled) {
				t.Errorf("Every returned %v, want context.Canceled", err)
			}
		})
	}
	began := time.Now()
	wait := ctxFor(t)
	for range ticks {
		// Every instance waits for the next tick, so none finds it gone.
		if err := clock.AwaitWaiters(wait, instances); err != nil {
			t.Fatalf("the instances never all waited for a tick: %v", err)
		}
		clock.Advance(time.Minute)
	}
	if err := clock.AwaitWaiters(wait, instances); err != nil {
		t.Fatalf("the last tick never ended: %v", err)
	}
	cancel()
	wg.Wait()
	t.Logf("%d ticks of a one-minute job on %d instances took %v", ticks, instances, time.Since(began))

	if overlap.Load() {
		t.Error("two runs of the job overlapped")
	}
	if len(ran) != ticks {
		t.Fatalf("the job ran %d times, want %d (once per tick): %v", len(ran), ticks, ran)
	}
	for i, tick := range ran {
		if want := start.Add(time.Duration(i+1) * time.Minute); !tick.Equal(want) {
			t.Errorf("run %d was for tick %v, want %v", i+1, tick, want)
		}
	}
}

// TestClockAfter: After receives once the Clock has moved by its
// duration, not before, and at once for none; AwaitWaiters counts those
// that wait.
func TestClockAfter(t *testing.T) {
	clock := padlocktest.New(t, padlocktest.WithManualClock()).Clock()
	start := clock.Now()
	now := clock.After(0)
	later := clock.After(time.Minute)
	if got := <-now; !got.Equal(start) {
		t.Errorf("After(0) received %v, want %v", got, start)
	}
	if err := clock.AwaitWaiters(ctxFor(t), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(59 * time.Second)
	select {
	case got := <-later:
		t.Fatalf("After(1m) received %v after 59s", got)
	default:
	}
	clock.Advance(time.Second)
	select {
	case got := <-later:
		if want := start.Add(time.Minute); !got.Equal(want) {
			t.Errorf("After(1m) received %v, want %v", got, want)
		}
	default:
		t.Fatal("After(1m) did not receive once the Clock moved a minute")
	}
	if got := clock.Now().Sub(start); got != time.Minute {
		t.Errorf("Now moved %v, want 1m", got)
	}
}
