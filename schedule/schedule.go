package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/who"
	"github.com/padlockgo/padlock/lockkey"
)

// Options shape a job's lock. The zero value is valid: a 30s lease
// (padlock.DefaultTTL), renewed while the job runs, released when it
// returns.
type Options struct {
	// AtMostFor is the job lock's lease: how long the job stays locked
	// after the instance running it crashed. It is renewed while the job
	// runs. Default: the Locker's default TTL (30s).
	AtMostFor time.Duration

	// AtLeastFor is the minimum time the lock is held from the moment it
	// was taken, however soon the job returns. It must not exceed
	// AtMostFor when both are set. Default: 0, released when the job
	// returns; half the interval for Every, where it must be shorter than
	// the interval.
	AtLeastFor time.Duration

	// OnError is told, for Every, of what went wrong in one tick: the
	// job's error, Redis unreachable, a lock lost during the run
	// (padlock.ErrNotHeld). Every goes on to the next tick. It is called
	// on Every's goroutine, so a slow one delays the next tick. Lock and
	// Run return their errors and ignore it. Default: nil, logged with
	// slog.Default at level Error.
	OnError func(err error)

	// Redactor shows the job's name in its lock's owner as the lock page
	// shows keys, for the name is the lock's key: the lock names who holds
	// it (padlock.Options.Caller, after the Locker's Owner) as
	// "job=#<hash>", or "job=<name>" when the name's namespace is one
	// Redactor makes readable (lockkey.WithReadableNamespaces), and Every
	// adds " every=<interval>". Share it with the lock page
	// (lockview.Config.Redactor). Default: nil, the process's Redactor,
	// every name hashed.
	Redactor *lockkey.Redactor

	// Clock is the time Every's ticks fall on, and AtLeastFor is counted
	// on (see Clock): a test's clock moved by hand (padlocktest.Env.Clock)
	// runs many ticks in no time. Default: nil, the wall clock.
	Clock Clock
}

// Validate reports the first invalid field: an error matching
// padlock.ErrInvalid that names it, or nil. The zero value is valid.
func (o Options) Validate() error {
	switch {
	case o.AtMostFor < 0:
		return fmt.Errorf("%w: Options.AtMostFor: must not be negative, got %v", padlock.ErrInvalid, o.AtMostFor)
	case o.AtLeastFor < 0:
		return fmt.Errorf("%w: Options.AtLeastFor: must not be negative, got %v", padlock.ErrInvalid, o.AtLeastFor)
	case o.AtMostFor > 0 && o.AtLeastFor > o.AtMostFor:
		return fmt.Errorf("%w: Options.AtLeastFor: %v is longer than AtMostFor %v", padlock.ErrInvalid, o.AtLeastFor, o.AtMostFor)
	}
	return nil
}

// Hold is a job's lock while the job runs. Unlock it when the job
// returns.
type Hold struct {
	lock  *padlock.Lock
	taken time.Time // after the acquire's reply, on clock: the minimum runs from here
	least time.Duration
	clock Clock
}

// Lock takes the lock of the job called name (the padlock key name) for
// one run, without waiting: padlock's ErrNotAcquired means another
// instance runs the job, or ran it less than AtLeastFor ago. Other errors
// are padlock's (ErrUnavailable, ErrInvalid, ErrClosed).
func Lock(ctx context.Context, l *padlock.Locker, name string, o Options) (*Hold, error) {
	return lock(ctx, l, name, o, 0)
}

// lock is Lock for a job run every interval (Every), 0 for none.
func lock(ctx context.Context, l *padlock.Locker, name string, o Options, every time.Duration) (*Hold, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	lk, err := l.Acquire(ctx, name, padlock.Options{TTL: o.AtMostFor, Caller: jobCaller(name, o.Redactor, every)})
	if err != nil {
		return nil, err
	}
	clock := o.clock()
	return &Hold{lock: lk, taken: clock.Now(), least: o.AtLeastFor, clock: clock}, nil
}

// jobCaller returns the Options.Caller of the lock of the job name, run
// every interval (0: not by Every).
func jobCaller(name string, r *lockkey.Redactor, every time.Duration) string {
	if every > 0 {
		return who.Join(who.Key("job", name, r), who.Field("every", every.String()))
	}
	return who.Join(who.Key("job", name, r))
}

// Lock returns the padlock Lock under the job: its Fence for the job's
// writes, its Context for the job's work.
func (h *Hold) Lock() *padlock.Lock { return h.lock }

// Unlock ends the run: it releases the lock, or when the minimum
// (AtLeastFor) has not passed yet, leaves it to expire when it has. It
// returns padlock.ErrNotHeld when the lock was lost during the run.
func (h *Hold) Unlock(ctx context.Context) error {
	return h.lock.ReleaseAfter(ctx, h.least-h.clock.Now().Sub(h.taken))
}

// unlockTimeout bounds Run's Unlock, which runs even when ctx has ended.
const unlockTimeout = 5 * time.Second

// Run runs fn under the lock of the job called name, unless another
// instance holds it: then it returns ran false and a nil error. fn gets a
// context that is cancelled when ctx ends or the lock is lost. Run
// returns fn's error, joined with the lock's when releasing it failed (a
// lock lost during the run reports padlock.ErrNotHeld), and Redis errors
// from taking the lock with ran false.
func Run(ctx context.Context, l *padlock.Locker, name string, o Options, fn func(ctx context.Context) error) (ran bool, err error) {
	h, err := Lock(ctx, l, name, o)
	switch {
	case errors.Is(err, padlock.ErrNotAcquired):
		return false, nil
	case err != nil:
		return false, err
	}
	// The job's context ends when the lock does: Unlock ends it.
	err = fn(h.lock.Context(ctx))
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer ucancel()
	return true, errors.Join(err, h.Unlock(uctx))
}
