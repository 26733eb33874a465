package padlock

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Multi-key locks: all of a set of keys or none.
//
// AcquireAll sorts and dedupes the keys, so every caller takes them in the
// same order whatever order it listed them in, and never holds some keys
// while it waits for others: when a key is busy, it gives back what it took
// in that attempt, waits for that key, and tries the whole set again. No
// cycle of waiters can form, so no deadlock.
//
// The keys of one Redis hash slot (every key, off Cluster) are taken by one
// script (lua/multi_acquire.lua) that checks them all before it sets any,
// so nobody ever sees part of them taken. On Cluster, where a script may
// only touch one slot, the slots are taken one after another in slot
// order, and a busy slot rolls back the ones taken before it. Each key is
// then an ordinary lock with its own lease and fence; the one watchdog
// renews them all, and every key's lock shares one context, so the first
// key lost ends the whole set (lock.go's finish cancels it).
//
// On a store other than one deployment reached directly (Redlock, replica
// acknowledgements) the keys are taken one by one in sorted order with the
// same rollback.

// MultiLock holds every key of a set (see Locker.AcquireAll). Its owner
// must call Release when done; until then every key's lease is renewed in
// the background unless Options.NoRenew was set. Methods are safe for
// concurrent use.
type MultiLock struct {
	locker   *Locker
	keys     []string        // sorted, unique
	members  []*Lock         // members[i] holds keys[i]
	groups   [][]int         // indexes into keys, in the order they were taken
	fallback bool            // taken key by key (not one script per slot)
	ctx      context.Context // shared by every key's Lock
	cancel   context.CancelCauseFunc
	released atomic.Bool
}

// AcquireAll takes the locks on every one of keys, or on none of them,
// waiting up to o.Wait for holders to let go. Duplicates are ignored, and
// the order of keys does not matter: AcquireAll takes them in one fixed
// order and never holds some while it waits for others, so callers that
// list the same keys in different orders cannot deadlock. Each key gets
// its own fence (MultiLock.Fence).
//
// The keys that share a Redis hash slot (on a single node or Sentinel
// deployment: all of them) are taken by one script, atomically. On
// Cluster the slots are taken one after another in slot order; when a
// slot's keys are busy, the slots taken before it are released again
// before AcquireAll waits, so a failed attempt leaves no key behind.
// (A lock's hash tag is its whole key, so on Cluster distinct keys share a
// slot only by chance: count one round trip per key there.)
//
// Errors are Acquire's: a *NotAcquiredError (matching ErrNotAcquired)
// naming the key that stayed busy, ErrUnavailable, ErrInvalid for an empty
// set, an empty key or Options.Fair (AcquireAll has no fair mode; a Fair
// default from WithDefaults is ignored), ErrClosed. Waiting is Acquire's
// too: a waiting AcquireAll sleeps until a release notice for the key that
// was busy arrives, or that holder's lease ends (re-checking at least
// every second), and o.Retry paces the attempts and may end the wait.
//
// A MultiLock is not reentrant: when ctx carries a lock of this Locker on
// one of the keys (see Lock.Context), AcquireAll returns an ErrInvalid
// error at once rather than wait for itself. The context from
// MultiLock.Context, though, makes Acquire of any one of its keys
// reentrant.
func (l *Locker) AcquireAll(ctx context.Context, keys []string, o Options) (*MultiLock, error) {
	began := time.Now()
	if len(keys) == 0 {
		return nil, invalid("keys", "must not be empty")
	}
	if slices.Contains(keys, "") {
		return nil, invalid("keys", "must not contain an empty key")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Fair {
		return nil, invalid("Options.Fair", "AcquireAll has no fair mode")
	}
	for _, k := range keys {
		if l.holds(ctx, k) {
			return nil, invalid("keys", "the context already holds %q through this Locker, and AcquireAll is not reentrant", k)
		}
	}
	if l.watchdog.isClosed() {
		return nil, ErrClosed
	}
	o = o.withDefaults(l.defaults)
	o.Fair = false
	if err := l.cfg.checkLease("Options.TTL", o.TTL); err != nil {
		return nil, err
	}
	a := &multiAcquisition{l: l, o: o, began: began, busy: -1}
	a.keys = slices.Clone(keys)
	slices.Sort(a.keys)
	a.keys = slices.Compact(a.keys)
	a.mint()
	a.group()
	if o.Wait > 0 {
		a.deadline = began.Add(o.Wait)
	}
	return a.run(ctx)
}

// holds reports whether ctx carries a held lock on key from l.
func (l *Locker) holds(ctx context.Context, key string) bool {
	g, _ := ctx.Value(ctxKey{}).(*guardedCtx)
	for ; g != nil; g = g.next {
		if r := g.lock.root(); r.locker == l && r.key == key && r.Err() == nil {
			return true
		}
	}
	return false
}

// Keys returns the keys the MultiLock holds, sorted, without duplicates.
func (m *MultiLock) Keys() []string { return slices.Clone(m.keys) }

// Fences returns the fence of each key, in the order of Keys: each is
// strictly greater than the fence of every earlier holder of that key on
// the same Redis deployment (see Lock.Fence). Keys taken together get
// distinct fences. On a Redlock Locker they are 0.
func (m *MultiLock) Fences() []int64 {
	f := make([]int64, len(m.members))
	for i, lk := range m.members {
		f[i] = lk.Fence()
	}
	return f
}

// Fence returns the fence of key, or 0 when the MultiLock does not hold
// key.
func (m *MultiLock) Fence(key string) int64 {
	if i, ok := slices.BinarySearch(m.keys, key); ok {
		return m.members[i].Fence()
	}
	return 0
}

// Done returns a channel that is closed when the set is released, or
// as soon as any one of its keys is lost; Err then says which.
func (m *MultiLock) Done() <-chan struct{} { return m.ctx.Done() }

// Err returns nil while every key is held, ErrLockLost once any one of
// them was lost (even before Done closes, as Lock.Err), and ErrReleased
// after Release.
func (m *MultiLock) Err() error {
	for _, lk := range m.members {
		_ = lk.Err() // ends the set if that key's trusted lease ran out
	}
	if m.ctx.Err() == nil {
		return nil
	}
	return context.Cause(m.ctx)
}

// Context returns a copy of parent that is cancelled as soon as the set is
// released or any of its keys is lost (context.Cause says which). It
// carries a lock on each key: Acquire of one of them through the same
// Locker with this context returns a reentrant handle at once.
func (m *MultiLock) Context(parent context.Context) context.Context {
	ctx := parent
	for _, lk := range m.members {
		ctx = lk.Context(ctx)
	}
	return ctx
}

// ValidUntil returns the moment until which every key is surely held (the
// earliest of their Lock.ValidUntil), or zero once any was lost or the set
// released.
func (m *MultiLock) ValidUntil() time.Time {
	var v time.Time
	for _, lk := range m.members {
		u := lk.ValidUntil()
		if u.IsZero() {
			return time.Time{}
		}
		if v.IsZero() || u.Before(v) {
			v = u
		}
	}
	return v
}

// Extend resets every key's lease to ttl from now and makes ttl the lease
// later renewals keep, one round trip per key. It returns ErrNotHeld when
// any key was lost (the set is then lost: release it), and an
// ErrUnavailable error when Redis did not answer, as Lock.Extend.
func (m *MultiLock) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return invalid("ttl", "must be at least 1ms, got %v", ttl)
	}
	if m.Err() != nil {
		return ErrNotHeld
	}
	if err := m.locker.cfg.checkLease("ttl", ttl); err != nil {
		return err
	}
	for _, lk := range m.members {
		if err := m.locker.resetLease(ctx, lk, ttl, true); err != nil {
			return err
		}
	}
	return nil
}

// Release lets every key go, one round trip per hash slot (one in all off
// Cluster). It returns ErrNotHeld when some key was no longer held (the
// others are released all the same), and an ErrUnavailable error when
// Redis could not be reached; either way no key is renewed any more. A
// ctx that is done, or that ends as the release goes out, does not keep
// the keys locked: the release is then sent (again) on a context of its
// own, for at most a second; one Redis did not answer goes on behind
// Release, sent again until Redis answers or until the keys' leases would
// have ended anyway, as a Lock's (see Lock.Release). Release is safe on
// a nil MultiLock and when called twice (later calls
// return nil). Release the set even after Done closed: the keys not lost
// stay locked until then.
func (m *MultiLock) Release(ctx context.Context) error {
	if m == nil || m.released.Swap(true) {
		return nil
	}
	l := m.locker
	for _, lk := range m.members {
		l.watchdog.remove(lk.lease)
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	var slots slotStore
	if !m.fallback {
		slots, _ = l.store.(slotStore)
	}
	var failed error
	lost := false
	for _, g := range m.groups {
		ids := make([]*lockID, len(g))
		for j, i := range g {
			ids[j] = m.members[i].id
		}
		held, err := l.releaseGroup(ctx, slots, ids, false)
		heard := redisAnswered(err)
		if endedOnItsWay(ctx, err) {
			// ctx ended as the release went out: sent again on a
			// clean-up's context of its own. Not held then: the first send
			// released them, or they were lost; err stands.
			rctx, rcancel := cleanupContext(ctx)
			again, aerr := l.releaseGroup(rctx, slots, ids, false)
			if aerr == nil && !slices.Contains(again, false) {
				held, err = again, nil
			}
			heard = redisAnswered(aerr)
			rcancel()
		}
		if !heard {
			// Unanswered: sent again behind the caller until Redis
			// answers or the keys' leases would have ended, as a single
			// lock's release is (Lock.letGo).
			var lease time.Duration
			for _, lk := range m.members {
				lease = max(lease, lk.Lease())
			}
			l.resendRelease(ctx, time.Now().Add(lease), func(ctx context.Context) error {
				_, err := l.releaseGroup(ctx, slots, ids, false)
				return err
			})
		}
		if err != nil {
			if failed == nil {
				failed = unavailable("release", err)
			}
			continue
		}
		for j, i := range g {
			if !held[j] {
				m.members[i].finish(ErrLockLost)
				lost = true
			}
		}
	}
	for _, lk := range m.members {
		lk.finish(ErrReleased) // no-op for a key already lost
	}
	m.cancel(ErrReleased) // no-op: a key's finish cancelled it
	switch {
	case failed != nil:
		return failed
	case lost:
		return ErrNotHeld
	}
	return nil
}

// String names the MultiLock's keys, for logs.
func (m *MultiLock) String() string {
	return fmt.Sprintf("padlock.MultiLock(%q)", m.keys)
}
