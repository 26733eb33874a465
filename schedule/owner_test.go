package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/schedule"
)

// holderOf returns the Holder that an Acquire of key on l is refused with.
func holderOf(t *testing.T, l *padlock.Locker, key string) string {
	t.Helper()
	_, err := l.Acquire(context.Background(), key, padlock.Options{})
	var na *padlock.NotAcquiredError
	if !errors.As(err, &na) {
		t.Errorf("Acquire of the job's key: got %v, want ErrNotAcquired", err) // not Fatal: Every's goroutine calls it too
		return ""
	}
	return na.Holder
}

// A job's lock names the job as the lock page shows its key: hashed, or
// as it is in a namespace the Redactor makes readable; Every adds its
// interval.
func TestJobLockNamesTheJob(t *testing.T) {
	ls, _ := instances(t, 2)
	ctx := ctxFor(t)
	readable, err := lockkey.NewRedactor(lockkey.WithReadableNamespaces("job"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		r    *lockkey.Redactor
		want string
	}{
		{"report:hourly", nil, "job=#" + (*lockkey.Redactor)(nil).Hash("report:hourly")},
		{"job:nightly-report", readable, "job=job:nightly-report"},
		{"report:hourly", readable, "job=#" + readable.Hash("report:hourly")},
	} {
		var got string
		ran, err := schedule.Run(ctx, ls[0], tc.name, schedule.Options{Redactor: tc.r}, func(context.Context) error {
			got = holderOf(t, ls[1], tc.name)
			return nil
		})
		if !ran || err != nil || got != tc.want {
			t.Errorf("Run(%q): got ran %v, %v, holder %q; want %q", tc.name, ran, err, got, tc.want)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	got := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- schedule.Every(ctx, ls[0], "job:settle", 200*time.Millisecond, schedule.Options{Redactor: readable}, func(context.Context) error {
			select {
			case got <- holderOf(t, ls[1], "job:settle"):
			default:
			}
			return nil
		})
	}()
	if h := <-got; h != "job=job:settle every=200ms" {
		t.Errorf("Every: got holder %q, want job=job:settle every=200ms", h)
	}
	cancel()
	<-done
}
