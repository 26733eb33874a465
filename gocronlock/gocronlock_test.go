package gocronlock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/gocronlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/schedule"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A fleet of gocron schedulers, one per instance, started with their
// clocks a little apart, runs the job exactly once per interval.
func TestFleetRunsTheJobOncePerInterval(t *testing.T) {
	const (
		interval  = time.Second
		intervals = 4
	)
	srv := redistest.Start(t)
	skews := []time.Duration{0, 70 * time.Millisecond, 150 * time.Millisecond}
	t0 := time.Now().Add(300 * time.Millisecond)
	var (
		mu   sync.Mutex
		runs = map[int]int{}
	)
	var schedulers []gocron.Scheduler
	for i, skew := range skews {
		l, err := padlock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		locker, err := gocronlock.New(l, schedule.Options{AtMostFor: 10 * time.Second, AtLeastFor: interval / 2})
		if err != nil {
			t.Fatal(err)
		}
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.NewJob(
			gocron.DurationJob(interval),
			gocron.NewTask(func() {
				k := int(time.Since(t0) / interval)
				mu.Lock()
				runs[k]++
				mu.Unlock()
			}),
			gocron.WithName("report"),
			gocron.WithStartAt(gocron.WithStartDateTime(t0.Add(skew))),
		)
		if err != nil {
			t.Fatalf("instance %d: NewJob: %v", i, err)
		}
		schedulers = append(schedulers, s)
	}
	for _, s := range schedulers {
		s.Start()
	}
	time.Sleep(time.Until(t0.Add(intervals*interval - interval/4)))
	for _, s := range schedulers {
		if err := s.Shutdown(); err != nil {
			t.Error(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k := range intervals {
		if runs[k] != 1 {
			t.Errorf("interval %d: the job ran %d times, want exactly once (all runs: %v)", k, runs[k], runs)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	srv := redistest.Start(t)
	l, err := padlock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := gocronlock.New(l, schedule.Options{AtMostFor: time.Second, AtLeastFor: time.Minute}); !errors.Is(err, padlock.ErrInvalid) {
		t.Errorf("New = %v, want ErrInvalid", err)
	}
}
