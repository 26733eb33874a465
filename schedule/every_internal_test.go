package schedule

import (
	"context"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// An instance that takes the lock AtLeastFor or more after the tick
// cannot tell whether someone ran the tick and let the lock go: it lets
// the lock go at once, without running the job.
func TestTickTakenTooLateDoesNotRun(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l, err := padlock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	o := Options{AtMostFor: 10 * time.Second, AtLeastFor: time.Second}

	for _, tt := range []struct {
		name string
		tick time.Time
		run  bool
	}{
		{"on time", time.Now(), true},
		{"too late", time.Now().Add(-o.AtLeastFor), false},
	} {
		ran := false
		jerr, lerr := runTick(ctx, l, "late-"+tt.name, 2*time.Second, o, tt.tick, func(context.Context) error { ran = true; return nil })
		if jerr != nil || lerr != nil {
			t.Fatalf("%s: runTick: %v, %v", tt.name, jerr, lerr)
		}
		if ran != tt.run {
			t.Errorf("%s: ran %v, want %v", tt.name, ran, tt.run)
		}
		n := rdb.Exists(ctx, l.RedisKey("late-"+tt.name)).Val()
		if want := map[bool]int64{true: 1, false: 0}[tt.run]; n != want {
			t.Errorf("%s: lock keys left: %d, want %d (held for AtLeastFor after a run, none after a skip)", tt.name, n, want)
		}
	}
}
