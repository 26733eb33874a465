package padlock

import (
	"context"
	"time"
)

// ReleaseAfter lets the lock go, but leaves the key locked for d more from
// now: it stops renewing the lease and shortens (or stretches) it to d in
// one owner-checked script, so that nobody else takes the key before d
// has passed, on the server's clock. It is how a scheduled job keeps its
// lock for a minimum time after it returns (see package schedule), so that
// instances whose clocks disagree do not run a short job twice. A d below
// 1ms is Release. The Lock ends (ErrReleased) at once; its key frees
// itself when the lease runs out, with no release notice, so waiters
// learn of it at their next look (at most every second).
//
// It returns what Release returns: ErrNotHeld when the lock was lost,
// ErrUnavailable when Redis could not be reached, and an ErrInvalid error,
// changing nothing, when d is longer than a Redlock Locker allows.
// ReleaseAfter is safe on a nil Lock and after Release (it does nothing
// then); on a reentrant handle it is that handle's Release.
func (lk *Lock) ReleaseAfter(ctx context.Context, d time.Duration) error {
	if d < time.Millisecond || lk == nil || lk.outer != nil || lk.locker == nil {
		return lk.Release(ctx)
	}
	if err := lk.locker.cfg.checkLease("d", d); err != nil {
		return err
	}
	if lk.released.Swap(true) {
		return nil
	}
	// No hand-off: the key must stay locked for d, for everyone. The
	// change is numbered after every renewal sent so far, so one still on
	// its way cannot undo it (lua/grant.lua).
	seq := lk.locker.watchdog.stop(lk.lease)
	ok, err := lk.locker.store.extend(ctx, lk.id, d, seq)
	switch {
	case err != nil:
		lk.finish(ErrReleased)
		return unavailable("release", err)
	case !ok:
		lk.finish(ErrLockLost)
		return ErrNotHeld
	}
	lk.finish(ErrReleased)
	return nil
}
