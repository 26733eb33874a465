package padlock_test

import (
	"testing"
	"time"

	"github.com/padlockgo/padlock"
)

func TestLimitAttempts(t *testing.T) {
	const step = 10 * time.Millisecond
	linear := padlock.LinearBackoff(step)
	for _, tc := range []struct {
		name string
		s    padlock.RetryStrategy
		want []bool // for attempts 0, 1, ...: whether a next attempt may go
	}{
		{"three", padlock.LimitAttempts(linear, 3), []bool{true, true, false, false}},
		{"one", padlock.LimitAttempts(linear, 1), []bool{false, false}},
		{"zero counts as one", padlock.LimitAttempts(linear, 0), []bool{false}},
		{"inner stop wins", padlock.LimitAttempts(padlock.NoRetry(), 5), []bool{false, false}},
		{"inner limit lower", padlock.LimitAttempts(padlock.LimitAttempts(linear, 2), 5), []bool{true, false, false}},
		{"outer limit lower", padlock.LimitAttempts(padlock.LimitAttempts(linear, 5), 2), []bool{true, false, false}},
		{"nil is the default", padlock.LimitAttempts(nil, 2), []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Twice over: the strategy keeps no state, so one serves every
			// Acquire alike.
			for range 2 {
				for attempt, more := range tc.want {
					d := tc.s.NextBackoff(attempt)
					if got := d >= 0; got != more {
						t.Fatalf("attempt %d: got backoff %v, want another attempt: %v", attempt, d, more)
					}
				}
			}
		})
	}
	if d := padlock.LimitAttempts(linear, 3).NextBackoff(1); d < step/2 || d >= step {
		t.Fatalf("got backoff %v, want the inner strategy's, in [%v, %v)", d, step/2, step)
	}
}
