package padlock

import (
	"slices"
	"strings"
	"time"
)

// HeldLock is one lock a Locker holds, as Locker.Held reports it.
type HeldLock struct {
	// Key is the lock key as passed to Acquire. It may carry request
	// data: show it only to whoever may see that.
	Key string
	// Token is the owner token in Redis (Lock.Token).
	Token string
	// Owner is the lock's Options.Owner and Options.Caller (joined by a
	// space), if set.
	Owner string
	// Fence is the lock's fence (0 on a Redlock Locker).
	Fence int64
	// Since is when the current holder got the lock.
	Since time.Time
	// LeaseLeft is how long the lock is surely held without another
	// renewal (Lock.ValidUntil less now).
	LeaseLeft time.Duration
	// Renew is false for a fixed lease (Options.NoRenew).
	Renew bool
	// Renewals counts the renewals Redis confirmed.
	Renewals int
	// Waiters is how many Acquire calls of this Locker wait for the key.
	Waiters int
}

// WaitingKey is a key some Acquire calls of a Locker wait for, as
// Locker.Waiting reports it.
type WaitingKey struct {
	// Key is the lock key as passed to Acquire.
	Key string
	// Waiters is how many Acquire calls wait for it.
	Waiters int
	// Since is when the longest-waiting of them called Acquire.
	Since time.Time
	// Notices is true when release notices for the key are known to
	// arrive; false while the waiters poll.
	Notices bool
}

// Held returns the locks the Locker holds right now, longest held first:
// what it knows itself, without a round trip. For the locks every process
// holds, see Inspect.
func (l *Locker) Held() []HeldLock {
	n, w := l.notifier, l.watchdog
	// Lock order: notifier.mu, then watchdog.mu (lease_watchdog.go).
	n.mu.Lock()
	defer n.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	out := make([]HeldLock, 0, len(w.leases))
	for _, e := range w.leases {
		ls := e.ls
		lk := ls.holder
		h := HeldLock{
			Key:       lk.key,
			Token:     lk.id.token,
			Owner:     ownerOf(lk.id.token),
			Fence:     lk.Fence(),
			Since:     lk.since,
			LeaseLeft: max(ls.validUntil.Sub(now), 0),
			Renew:     ls.renew,
			Renewals:  ls.renewals,
		}
		if kw := n.keys[ls.id.lockKey()]; kw != nil {
			h.Waiters = len(kw.waiters)
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b HeldLock) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// Waiting returns the keys Acquire calls of this Locker wait for right
// now, longest waiting first. No round trip.
func (l *Locker) Waiting() []WaitingKey {
	n := l.notifier
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]WaitingKey, 0, len(n.keys))
	for _, kw := range n.keys {
		if len(kw.waiters) == 0 {
			continue
		}
		first := kw.waiters[0].a
		out = append(out, WaitingKey{Key: first.key, Waiters: len(kw.waiters), Since: first.began, Notices: kw.live})
	}
	slices.SortFunc(out, func(a, b WaitingKey) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}
