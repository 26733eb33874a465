package padlocktest

import (
	"context"
	"sync"
	"time"
)

// Clock is a clock the test moves by hand, for code that waits on one: give
// it to schedule.Every (schedule.Options.Clock), and a job's ticks come
// when the test calls Advance, so ten ticks of a one-minute job run in
// milliseconds. Advance moves Redis's clock by as much (Env.Advance), so
// a job's lock held AtLeastFor on the Clock has ended in Redis too when the
// next tick comes. Get it from Env.Clock; its methods are safe for
// concurrent use.
//
// A test waits, before each Advance, until the code under test waits on
// the Clock (AwaitWaiters): a runner still busy with one tick when the
// Clock passes the next would find that tick gone, as a machine that woke
// too late does, and skip it.
type Clock struct {
	env *Env

	mu      sync.Mutex
	now     time.Time
	waiters []clockWaiter
	// changed is closed, and replaced, when a waiter comes.
	changed chan struct{}
}

// clockWaiter is one After: its channel receives once the Clock reaches at.
type clockWaiter struct {
	at time.Time
	c  chan time.Time
}

// Clock returns the Env's Clock, the same each call. It reads midnight
// UTC of the day the Env was started, so that the ticks of any interval
// that divides a day fall on round times, until the test moves it.
func (e *Env) Clock() *Clock {
	e.clockOnce.Do(func() {
		e.manual = &Clock{env: e, now: time.Now().UTC().Truncate(24 * time.Hour), changed: make(chan struct{})}
	})
	return e.manual
}

// Now returns the Clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the Clock's time once the Clock
// has moved on by d, at once for d <= 0. A channel nobody receives from
// any more is let go when its time comes.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, clockWaiter{at: c.now.Add(d), c: ch})
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Advance moves the Clock on by d, and Redis's clock with it
// (Env.Advance): every After whose time has come receives. It does not
// wait for what runs then; AwaitWaiters does.
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.env.Advance(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.c <- c.now
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// AwaitWaiters waits until n Afters or more wait for the Clock to move (n
// runners of schedule.Every wait for their next tick, say), and returns
// nil then, or ctx's error if ctx ends first.
func (c *Clock) AwaitWaiters(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		waiting, changed := len(c.waiters), c.changed
		c.mu.Unlock()
		if waiting >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
