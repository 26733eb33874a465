package schedule_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/schedule"
)

// patience bounds every wait for something that must happen; the tests
// never assert speed.
const patience = 60 * time.Second

// A fleet of three instances, two loops each, runs the job at most once
// per tick, whoever wins and however late a loaded machine wakes, and
// keeps running it tick after tick; cancelling the context stops every
// loop with its error.
func TestEveryRunsOncePerIntervalAcrossTheFleet(t *testing.T) {
	const (
		interval = 400 * time.Millisecond
		want     = 5 // runs to see
	)
	ls, _ := instances(t, 3)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()

	var (
		mu    sync.Mutex
		ticks = map[time.Time][]int{} // tick -> the instances that ran it
	)
	runs := make(chan struct{}, 100)
	errs := make(chan error, 6)
	for i, l := range ls {
		for range 2 {
			go func() {
				errs <- schedule.Every(ctx, l, "digest", interval, schedule.Options{AtMostFor: 10 * time.Second},
					func(jctx context.Context) error {
						tick, ok := schedule.Tick(jctx)
						if !ok {
							t.Error("the job's context carries no tick")
						}
						mu.Lock()
						ticks[tick] = append(ticks[tick], i)
						mu.Unlock()
						runs <- struct{}{}
						return nil
					})
			}()
		}
	}
	for range want {
		select {
		case <-runs:
		case <-time.After(patience):
			t.Fatalf("fewer than %d runs in %v", want, patience)
		}
	}
	cancel()
	for range 6 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("Every after cancel: got %v, want context.Canceled", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for tick, who := range ticks {
		if len(who) != 1 {
			t.Errorf("tick %v: the job ran %d times (instances %v), want once", tick.Format("15:04:05.000"), len(who), who)
		}
	}
}

// The job's errors, and a lock lost during a run, go to OnError, and the
// loop goes on; a closed Locker ends it.
func TestEveryErrors(t *testing.T) {
	ls, rdb := instances(t, 1)
	ctx := ctxFor(t)
	boom := errors.New("boom")
	reported := make(chan error, 10)
	runs := 0
	done := make(chan error, 1)
	go func() {
		done <- schedule.Every(ctx, ls[0], "export", 200*time.Millisecond, schedule.Options{
			OnError: func(err error) { reported <- err },
		}, func(jctx context.Context) error {
			runs++
			switch runs {
			case 1:
				return boom
			case 2:
				// The lock goes from Redis during the run: Unlock finds it
				// gone.
				if err := rdb.Del(jctx, ls[0].RedisKey("export")).Err(); err != nil {
					return err
				}
				return nil
			}
			_ = ls[0].Close() // the service shuts its Locker down
			return nil
		})
	}()
	if err := <-reported; !errors.Is(err, boom) {
		t.Errorf("first report: got %v, want the job's error", err)
	}
	if err := <-reported; !errors.Is(err, padlock.ErrNotHeld) {
		t.Errorf("second report: got %v, want ErrNotHeld (the lock was lost)", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, padlock.ErrClosed) {
			t.Errorf("Every after its Locker closed: got %v, want ErrClosed", err)
		}
	case <-time.After(patience):
		t.Fatal("Every went on after its Locker closed")
	}
	if runs != 3 {
		t.Errorf("runs: got %d, want 3", runs)
	}
}

// Cancelling the context while the job runs cancels the job's context and
// ends the loop.
func TestEveryStopsARunningJob(t *testing.T) {
	ls, rdb := instances(t, 1)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	inJob := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- schedule.Every(ctx, ls[0], "sync", 100*time.Millisecond, schedule.Options{}, func(jctx context.Context) error {
			close(inJob)
			<-jctx.Done()
			return jctx.Err()
		})
	}()
	<-inJob
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Every: got %v, want context.Canceled", err)
	}
	// The lock stays for the rest of AtLeastFor at most, then goes.
	if d := rdb.PTTL(context.Background(), ls[0].RedisKey("sync")).Val(); d > 50*time.Millisecond {
		t.Errorf("lease left after the loop stopped: %v, want at most the rest of AtLeastFor (50ms)", d)
	}
}

func TestEveryInvalid(t *testing.T) {
	ls, _ := instances(t, 1)
	job := func(context.Context) error { return nil }
	tests := []struct {
		name     string
		l        *padlock.Locker
		job      string
		interval time.Duration
		o        schedule.Options
		fn       func(context.Context) error
	}{
		{"nil Locker", nil, "j", time.Second, schedule.Options{}, job},
		{"nil func", ls[0], "j", time.Second, schedule.Options{}, nil},
		{"empty name", ls[0], "", time.Second, schedule.Options{}, job},
		{"zero interval", ls[0], "j", 0, schedule.Options{}, job},
		{"AtLeastFor as long as the interval", ls[0], "j", time.Second, schedule.Options{AtLeastFor: time.Second}, job},
		{"AtLeastFor past AtMostFor", ls[0], "j", time.Minute, schedule.Options{AtMostFor: time.Second, AtLeastFor: 2 * time.Second}, job},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A valid loop would wait for its first tick: the context
			// ends it if validation does not.
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			if err := schedule.Every(ctx, tt.l, tt.job, tt.interval, tt.o, tt.fn); !errors.Is(err, padlock.ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
		})
	}
}
