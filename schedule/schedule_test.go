package schedule_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/padlocktest"
	"github.com/padlockgo/padlock/schedule"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// instances returns n Lockers on one fresh server (n instances of a
// service), closed when t ends, and a client to look at Redis.
func instances(t *testing.T, n int) ([]*padlock.Locker, *redis.Client) {
	srv := redistest.Start(t)
	ls := make([]*padlock.Locker, n)
	for i := range ls {
		l, err := padlock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls[i] = l
	}
	return ls, srv.Client(t)
}

// clocked returns n Lockers (n instances of a service) on one in-process
// Redis whose clock is the test's, and that clock: a job's AtLeastFor, in
// Redis and in Options.Clock, ends when the test moves it, not when a
// loaded machine gets round to it.
func clocked(t *testing.T, n int) ([]*padlock.Locker, *redis.Client, *padlocktest.Clock) {
	env := padlocktest.New(t, padlocktest.WithManualClock())
	ls := []*padlock.Locker{env.Locker()}
	for len(ls) < n {
		l, err := padlock.New(env.Client())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
	}
	return ls, env.Client(), env.Clock()
}

// A job that returns at once keeps its lock until AtLeastFor has passed:
// meanwhile another instance skips the job; after it, the job runs again.
// Regression: the test slept to half of AtLeastFor in real time, and a
// loaded machine that woke late found the minimum over.
func TestAtLeastForKeepsTheLockAfterTheJob(t *testing.T) {
	ls, rdb, clock := clocked(t, 2)
	ctx := ctxFor(t)
	o := schedule.Options{AtMostFor: 10 * time.Second, AtLeastFor: 1500 * time.Millisecond, Clock: clock}
	ran, err := schedule.Run(ctx, ls[0], "report", o, func(context.Context) error { return nil })
	if !ran || err != nil {
		t.Fatalf("first Run = %v, %v; want ran", ran, err)
	}
	if d := rdb.PTTL(ctx, ls[0].RedisKey("report")).Val(); d <= 0 || d > o.AtLeastFor {
		t.Errorf("lease left after the job = %v, want the rest of AtLeastFor (0, %v]", d, o.AtLeastFor)
	}
	clock.Advance(o.AtLeastFor / 2)
	ran, err = schedule.Run(ctx, ls[1], "report", o, func(context.Context) error {
		t.Error("the second instance ran the job within AtLeastFor")
		return nil
	})
	if ran || err != nil {
		t.Errorf("Run within AtLeastFor = %v, %v; want skipped", ran, err)
	}
	clock.Advance(o.AtLeastFor/2 + time.Millisecond)
	ran, err = schedule.Run(ctx, ls[1], "report", o, func(context.Context) error { return nil })
	if !ran || err != nil {
		t.Errorf("Run after AtLeastFor = %v, %v; want ran", ran, err)
	}
}

// Without AtLeastFor the lock goes when the job returns; while the job
// runs, others skip, and the job's context lives.
func TestRunSkipsWhileTheJobRuns(t *testing.T) {
	ls, rdb := instances(t, 2)
	ctx := ctxFor(t)
	inJob, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := schedule.Run(ctx, ls[0], "sync", schedule.Options{}, func(jctx context.Context) error {
			close(inJob)
			<-finish
			return jctx.Err()
		})
		done <- err
	}()
	<-inJob
	if ran, err := schedule.Run(ctx, ls[1], "sync", schedule.Options{}, func(context.Context) error { return nil }); ran || err != nil {
		t.Errorf("Run while the job runs elsewhere = %v, %v; want skipped", ran, err)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Errorf("job: %v", err)
	}
	if n := rdb.Exists(ctx, ls[0].RedisKey("sync")).Val(); n != 0 {
		t.Errorf("lock left after the job = %d, want released", n)
	}
	boom := errors.New("boom")
	if ran, err := schedule.Run(ctx, ls[1], "sync", schedule.Options{}, func(context.Context) error { return boom }); !ran || !errors.Is(err, boom) {
		t.Errorf("Run = %v, %v; want ran with the job's error", ran, err)
	}
}

// A fleet of instances, each firing the schedule with its own clock skew,
// runs a short job exactly once per interval. The skews are moments on the
// test's clock, so a loaded machine cannot stretch them past AtLeastFor.
// Regression: the instances slept to their moments in real time, and one
// that woke over half an interval late ran the interval's job again.
func TestFleetRunsTheJobOncePerInterval(t *testing.T) {
	const (
		interval  = time.Second
		intervals = 5
	)
	ls, _, clock := clocked(t, 4)
	ctx := ctxFor(t)
	o := schedule.Options{AtMostFor: 10 * time.Second, AtLeastFor: interval / 2, Clock: clock}
	skews := []time.Duration{0, 60 * time.Millisecond, 110 * time.Millisecond, 150 * time.Millisecond}
	var runs [intervals]atomic.Int32
	for k := range intervals {
		at := time.Duration(0)
		for i, l := range ls { // the skews in order: instance i fires skews[i] into the interval
			clock.Advance(skews[i] - at)
			at = skews[i]
			var wg sync.WaitGroup
			for range 2 { // two goroutines per instance, too
				wg.Go(func() {
					if _, err := schedule.Run(ctx, l, "nightly", o, func(context.Context) error {
						runs[k].Add(1)
						return nil
					}); err != nil {
						t.Errorf("Run: %v", err)
					}
				})
			}
			wg.Wait()
		}
		clock.Advance(interval - at)
	}
	for k := range runs {
		if n := runs[k].Load(); n != 1 {
			t.Errorf("interval %d: the job ran %d times, want exactly once", k, n)
		}
	}
}

func TestOptionsInvalid(t *testing.T) {
	for _, o := range []schedule.Options{
		{AtMostFor: -1},
		{AtLeastFor: -1},
		{AtMostFor: time.Second, AtLeastFor: 2 * time.Second},
	} {
		if err := o.Validate(); !errors.Is(err, padlock.ErrInvalid) {
			t.Errorf("%+v.Validate() = %v, want ErrInvalid", o, err)
		}
	}
}
