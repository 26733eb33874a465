package padlock

import (
	"context"
	"sync/atomic"
	"time"
)

// Semaphore caps how many holders each key has at once: at most Permits,
// across every process that shares the Redis deployment. Where a Lock
// admits one holder, a Semaphore admits N (at most 3 calls at once to a
// payment provider per merchant, say). Build one with Locker.Semaphore;
// it is safe for concurrent use and holds nothing in Redis itself.
//
// Each permit is a *Lock with a lease of its own: the Locker's watchdog
// renews it while held (one pipelined round trip per node for every
// renewal due, mutexes and permits alike), its Done channel and contexts
// say when it is lost, before its lease can run out, and a holder that
// crashed frees its permit when the lease ends. Its Fence is strictly
// greater than the fence of every permit, lock or hold taken before it in
// the key's hash slot: it orders the acquisitions, though with N holders
// at once a store cannot refuse all but the newest, as it can for a mutex.
//
// In Redis a key's permits are one sorted set of holder tokens, scored by
// lease end, which expires with its last holder; fair waiters queue in a
// list beside it (see "What lives in Redis" in docs/locks.md).
type Semaphore struct {
	l       *Locker
	hs      holdStore
	permits atomic.Int64
}

// Semaphore returns a semaphore of permits permits per key on l's
// deployment. It returns an ErrInvalid error when permits is below 1, or
// when l is a Redlock Locker: a permit count kept on independent nodes is
// no bound at all.
func (l *Locker) Semaphore(permits int) (*Semaphore, error) {
	if permits < 1 {
		return nil, invalid("permits", "must be at least 1, got %d", permits)
	}
	hs, ok := l.store.(holdStore)
	if !ok {
		return nil, invalid("Semaphore", "a Redlock Locker keeps no semaphores: use New on one deployment")
	}
	s := &Semaphore{l: l, hs: hs}
	s.permits.Store(int64(permits))
	return s, nil
}

// Locker returns the Locker the semaphore takes its permits through.
func (s *Semaphore) Locker() *Locker { return s.l }

// Permits returns how many holders a key may have at once.
func (s *Semaphore) Permits() int { return int(s.permits.Load()) }

// SetPermits changes how many holders a key may have at once, for the
// acquisitions that begin from now on and for those still waiting. Growing
// it wakes this process's waiters at once. Shrinking it evicts nobody:
// holders keep their permits until they release them, and new holders wait
// until fewer than n hold. It returns an ErrInvalid error when n is below 1.
//
// The bound is each acquisition's own: processes that disagree on it (a
// rolling deploy) each admit holders up to theirs, so no key ever has more
// holders than the largest bound in use.
func (s *Semaphore) SetPermits(n int) error {
	if n < 1 {
		return invalid("permits", "must be at least 1, got %d", n)
	}
	if old := s.permits.Swap(int64(n)); int64(n) > old {
		s.l.notifier.kickHolds(func(h *holdAcquisition) bool { return h.sem == s })
	}
	return nil
}

// Acquire takes one of key's permits, waiting up to o.Wait for a holder
// to give one back; it is Locker.Acquire for a semaphore, with the same
// Options, errors and waiting. The caller owns the returned Lock and must
// Release it, which gives the permit back.
//
// A waiting Acquire does not poll: a release publishes a notice that
// wakes one waiter, and in fair mode (o.Fair) the waiter the permit is
// promised to, which is the oldest waiter live in the key's queue in
// Redis; newcomers do not take free permits that queued waiters are
// owed. Every user of a key should agree on Fair.
//
// If ctx carries a permit of key from this Locker (see Lock.Context),
// Acquire returns a reentrant handle on it at once, without asking Redis:
// code that calls itself under one permit does not wait for a second.
func (s *Semaphore) Acquire(ctx context.Context, key string, o Options) (*Lock, error) {
	began := time.Now()
	l := s.l
	if key == "" {
		return nil, invalid("key", "must not be empty")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if lk := l.reentrantHold(ctx, key, holdPermit); lk != nil {
		return lk, nil
	}
	if l.watchdog.isClosed() {
		return nil, ErrClosed
	}
	o = o.withDefaults(l.defaults)
	if err := l.cfg.checkLease("Options.TTL", o.TTL); err != nil {
		return nil, err
	}
	keys := l.keys.holdKeys(key, ":sem")
	fair := "0"
	if o.Fair {
		fair = "1"
	}
	mk := func() *lockID { return newHoldID(holdPermit, keys, o, s.permits.Load(), fair) }
	h := &holdAcquisition{
		acquisition: acquisition{l: l, key: key, o: o, id: mk(), began: began, mint: mk},
		channel:     keys[0],
		policy:      wakeOne,
		sem:         s,
		queues:      o.Fair,
	}
	if o.Fair {
		h.named = newToken() // its place in the queue
	}
	if o.Wait > 0 {
		h.deadline = began.Add(o.Wait)
	}
	h.attempt = s.attempt
	return h.run(ctx)
}

// pickSemAcquire picks sem_acquire.lua from a flavour of hold scripts.
func pickSemAcquire(hs *holdScripts) *script { return hs.semAcquire }

func (s *Semaphore) attempt(ctx context.Context, h *holdAcquisition, queueFor time.Duration) (grant, error) {
	id := h.id
	return holdGrant(s.hs.evalHold(ctx, pickSemAcquire, id.keys[:], id.token, id.argv[1], s.permits.Load(), id.rel.args[1], queueFor.Milliseconds(), h.place()))
}
