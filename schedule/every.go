package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/padlockgo/padlock"
)

// Every runs fn once per interval across a fleet, until ctx ends: every
// instance of a service calls it with the same name and interval, and at
// each tick the instance that takes the job's lock runs fn while the
// others skip. It returns ctx.Err() when ctx ends, padlock.ErrClosed when
// the Locker is closed, and an error matching padlock.ErrInvalid, before
// any tick, when name, interval or o is invalid.
//
// Ticks fall on the multiples of interval on the wall clock (time.Time's
// Truncate: every hour on the hour for time.Hour, every 5 minutes at :00,
// :05, ...), so instances started at different times fire together;
// the first tick is the next multiple after the call. o.Clock, when set,
// is the clock they fall on instead (a test's, see Clock).
//
// The job's lock follows Run's rules (see Options), with one more for the
// loop. AtLeastFor, which keeps the lock after a short run so that
// instances firing a little later skip the tick, defaults to half the
// interval here, and must be shorter than the interval (or the next tick
// would find the lock still held; above half the interval, a run that
// began late in its interval may hold the lock into the next tick, which
// is then skipped). And an instance that takes the lock
// AtLeastFor or more after the tick lets it go without running fn: by
// then the run of an instance that fired on time may have ended and let
// the lock go, so only the lock's holders of the tick's first AtLeastFor
// can be sure nobody ran it before them. So a run is never repeated in one
// interval, however late a loaded machine wakes (as long as clocks agree
// within AtLeastFor), and a tick every instance wakes too late for is
// skipped. A run longer than the interval makes the others skip the ticks
// it overlaps, and its own instance the ticks that passed meanwhile: runs
// never overlap, and missed ticks are not caught up.
//
// fn gets a context that is cancelled when ctx ends or the lock is lost,
// and carries the tick the run is for (see Tick).
// What goes wrong in one tick, fn's error, Redis unreachable, a lock lost
// during the run (padlock.ErrNotHeld), goes to o.OnError, and the loop
// goes on to the next tick.
func Every(ctx context.Context, l *padlock.Locker, name string, interval time.Duration, o Options, fn func(ctx context.Context) error) error {
	switch {
	case l == nil:
		return fmt.Errorf("%w: schedule.Every: nil Locker", padlock.ErrInvalid)
	case fn == nil:
		return fmt.Errorf("%w: schedule.Every: nil job func", padlock.ErrInvalid)
	case name == "":
		return fmt.Errorf("%w: schedule.Every: empty job name", padlock.ErrInvalid)
	case interval <= 0:
		return fmt.Errorf("%w: schedule.Every: interval must be positive, got %v", padlock.ErrInvalid, interval)
	}
	if o.AtLeastFor == 0 {
		o.AtLeastFor = interval / 2
	}
	if o.AtLeastFor >= interval {
		return fmt.Errorf("%w: schedule.Every: Options.AtLeastFor: %v is not shorter than the interval %v", padlock.ErrInvalid, o.AtLeastFor, interval)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	report := o.OnError
	if report == nil {
		report = func(err error) { slog.Default().Error("schedule: job tick failed", "job", name, "err", err) }
	}
	clock := o.clock()
	for {
		tick := clock.Now().Truncate(interval).Add(interval)
		for now := clock.Now(); now.Before(tick); now = clock.Now() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-clock.After(tick.Sub(now)):
			}
		}
		jerr, lerr := runTick(ctx, l, name, interval, o, tick, fn)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(lerr, padlock.ErrClosed), errors.Is(lerr, padlock.ErrInvalid):
			return lerr
		case jerr != nil || lerr != nil:
			report(errors.Join(jerr, lerr))
		}
	}
}

// runTick is one tick of Every: Run, unless the lock came too late to
// prove that nobody ran the tick before. It returns the job's error and
// the lock's apart.
func runTick(ctx context.Context, l *padlock.Locker, name string, interval time.Duration, o Options, tick time.Time,
	fn func(ctx context.Context) error) (jerr, lerr error) {
	h, err := lock(ctx, l, name, o, interval)
	switch {
	case errors.Is(err, padlock.ErrNotAcquired):
		return nil, nil
	case err != nil:
		return nil, err
	}
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer ucancel()
	if h.taken.Sub(tick) >= o.AtLeastFor {
		// Someone who fired on time may have run the job and let it go.
		return nil, h.lock.Release(uctx)
	}
	if err := fn(context.WithValue(h.lock.Context(ctx), tickKey{}, tick)); err != nil {
		jerr = fmt.Errorf("schedule: job %q: %w", name, err)
	}
	return jerr, h.Unlock(uctx)
}

type tickKey struct{}

// Tick returns the tick an Every run is for, from the context the job
// was given: the multiple of the interval it fired at, the same on every
// instance, to name what the run covers (the hour a report is for). It
// reports false for a context that comes from no Every run.
func Tick(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(tickKey{}).(time.Time)
	return t, ok
}
