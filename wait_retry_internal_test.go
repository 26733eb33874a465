package padlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// stopAfter is a strategy that stops after that many attempts, written
// without LimitAttempts.
type stopAfter int

func (s stopAfter) NextBackoff(attempt int) time.Duration {
	if attempt+1 >= int(s) {
		return -1
	}
	return time.Millisecond
}

// TestRetryStrategyStopsWaiting has a strategy stop the wait for a key
// another Locker holds while release notices flow: the Acquire must give
// up after the attempts the strategy allows, however much of its Wait is
// left, and NoRetry must not take the key even when the holder lets go
// within the Wait.
func TestRetryStrategyStopsWaiting(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name         string
		retry        RetryStrategy
		releaseAfter time.Duration // 0: the holder keeps the key
		want         int
	}{
		{"NoRetry, holder releases", NoRetry(), 100 * time.Millisecond, 1},
		{"LimitAttempts 3", LimitAttempts(LinearBackoff(time.Millisecond), 3), 0, 3},
		{"own strategy stops after 5", stopAfter(5), 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustNew(t, srv.Client(t))
			defer l.Close()
			// Look again every 20ms, short of a notice: a strategy that
			// were ignored would let hundreds of attempts through.
			l.recheck = 20 * time.Millisecond
			holderLocker := mustNew(t, srv.Client(t))
			defer holderLocker.Close()
			ctx := context.Background()
			key := strings.ReplaceAll(t.Name(), "/", ":")

			holder, err := holderLocker.Acquire(ctx, key, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Release(ctx)
			if tc.releaseAfter > 0 {
				time.AfterFunc(tc.releaseAfter, func() { holder.Release(ctx) })
			}
			lk, err := l.Acquire(ctx, key, Options{Wait: 10 * time.Second, Retry: tc.retry})
			if lk != nil {
				lk.Release(ctx)
				t.Fatalf("took the lock (fence %d); want ErrNotAcquired after %d attempts", lk.Fence(), tc.want)
			}
			var na *NotAcquiredError
			if !errors.As(err, &na) {
				t.Fatalf("got %v, want ErrNotAcquired", err)
			}
			if na.Attempts != tc.want {
				t.Fatalf("got %d attempts, want %d", na.Attempts, tc.want)
			}
		})
	}
}
