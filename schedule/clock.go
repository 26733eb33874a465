package schedule

import "time"

// A Clock is the time a job's ticks and its AtLeastFor follow: Now tells
// the time, and After returns a channel that receives once d has passed on
// it, as time.Now and time.After do for the wall clock, the default. A
// test gives Every a clock it moves by hand (padlocktest.Env.Clock), so a
// job's ticks come when the test says, not when the minutes pass. A Clock
// must be safe for concurrent use.
//
// Only the ticks and the moment a run's minimum ends are on the Clock:
// the lock's lease and its renewals follow the Locker's, and Redis's,
// clocks. A Clock moved by hand should move Redis's clock with it
// (padlocktest's does), or a lock held AtLeastFor on the Clock is still
// held, in Redis, when the next tick comes.
type Clock interface {
	// Now returns the clock's time.
	Now() time.Time
	// After returns a channel that receives the clock's time once d has
	// passed on the clock.
	After(d time.Duration) <-chan time.Time
}

// wallClock is the default Clock: the process's.
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// clock returns o's Clock, or the wall clock.
func (o Options) clock() Clock {
	if o.Clock == nil {
		return wallClock{}
	}
	return o.Clock
}
