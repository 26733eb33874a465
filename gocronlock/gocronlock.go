// Package gocronlock lets go-co-op/gocron v2 schedulers on many instances
// run each job once per run, through padlock: pass a Locker to
// gocron.WithDistributedLocker (or WithDistributedJobLocker). It is its own
// module, so that only its users compile gocron.
//
// Each run of a job takes the padlock lock named after the job (gocron
// passes the job's name as the key) without waiting; an instance that finds
// it held skips the run, as gocron expects. The lock's lease is renewed
// while the job runs, and with AtLeastFor it is kept for a minimum time
// after the run began, so that instances whose clocks disagree do not run
// a short job twice (see package schedule).
//
// gocron does not give the job the lock's context: a job that must stop
// when the lock is lost should use schedule.Run itself.
package gocronlock

import (
	"context"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/schedule"
)

// Locker is a gocron.Locker on a padlock Locker. It is safe for concurrent
// use.
type Locker struct {
	l *padlock.Locker
	o schedule.Options
}

var _ gocron.Locker = (*Locker)(nil)

// New returns a gocron.Locker that takes each job's lock through l with
// o (zero: a 30s lease renewed while the job runs, released when it
// returns). It returns a padlock.ErrInvalid error naming a bad field of
// o. The Locker does not own l: close l after the schedulers shut down.
func New(l *padlock.Locker, o schedule.Options) (*Locker, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Locker{l: l, o: o}, nil
}

// Lock takes the lock of the job called key for one run. It returns
// padlock.ErrNotAcquired when another instance runs the job (or ran it
// less than AtLeastFor ago): gocron then skips the run.
func (x *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	h, err := schedule.Lock(ctx, x.l, key, x.o)
	if err != nil {
		return nil, err
	}
	return unlocker{h}, nil
}

// unlockTimeout bounds an Unlock, which runs even when the scheduler's
// context has ended (gocron unlocks with the job's context).
const unlockTimeout = 5 * time.Second

type unlocker struct{ h *schedule.Hold }

// Unlock ends the run (schedule.Hold.Unlock).
func (u unlocker) Unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	return u.h.Unlock(ctx)
}
