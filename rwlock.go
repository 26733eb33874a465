package padlock

import (
	"context"
	"time"
)

// Read-write locks: many readers or one writer per key.
//
// A read hold and a write hold are *Locks like any other: leased, renewed
// by the watchdog, lost loudly, released with Release. Readers share the
// lock while no writer holds it and no writer waits; a writer takes it
// when nobody holds it. A waiting writer queues in Redis, and while one
// is queued new readers wait too, so a steady stream of readers cannot
// starve it: the readers inside finish, the writer goes in, then the
// readers that waited. Writers are served in the order they queued.
//
// In Redis (docs/locks.md, "What lives in Redis"): the readers are a sorted
// set of tokens scored by lease end, P{K}:rw; the writer a string key
// P{K}:rw:w whose expiry is its lease; the waiting writers a list
// P{K}:rw:queue. Each expires with the last of its leases or entries, so
// nothing outlives the lock.

// AcquireRead takes a read hold on key: shared with other readers,
// exclusive of any writer. It waits up to o.Wait while a writer holds the
// lock or waits for it, and is otherwise Acquire for a read-write lock:
// the same Options (Fair does not apply: waiting writers are always served
// in order, and readers after them), errors, lease, renewal and lost
// signal. The caller owns the returned Lock and must Release it.
//
// Its Fence is above every fence handed out before it in the key's slot,
// a writer's included; readers hold at once, so it orders them without
// excluding any.
//
// If ctx carries a read or a write hold on key from this Locker (see
// Lock.Context), AcquireRead returns a reentrant handle on it at once,
// without asking Redis: a writer may read what it writes. A read-write
// key is apart from a mutex or a semaphore of the same name.
func (l *Locker) AcquireRead(ctx context.Context, key string, o Options) (*Lock, error) {
	return l.acquireRW(ctx, key, o, false)
}

// AcquireWrite takes the write hold on key: exclusive of readers and of
// other writers. While it waits (o.Wait), it keeps new readers out, and
// takes the lock as soon as the readers inside have let go; otherwise it
// is Acquire for a read-write lock. Its Fence is strictly greater than
// the fence of every earlier holder of the key, reader or writer: a store
// that refuses writes with a fence lower than the highest it has seen
// refuses a writer that lost the lock.
//
// If ctx carries the write hold on key from this Locker, AcquireWrite
// returns a reentrant handle on it at once. If ctx carries only a read
// hold on key, it returns an ErrInvalid error: a reader that waited to
// become the writer would wait for itself (and two such readers for each
// other), so release the read hold first.
func (l *Locker) AcquireWrite(ctx context.Context, key string, o Options) (*Lock, error) {
	return l.acquireRW(ctx, key, o, true)
}

func (l *Locker) acquireRW(ctx context.Context, key string, o Options, write bool) (*Lock, error) {
	began := time.Now()
	if key == "" {
		return nil, invalid("key", "must not be empty")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if write {
		if lk := l.reentrantHold(ctx, key, holdWrite); lk != nil {
			return lk, nil
		}
		if l.reentrantHold(ctx, key, holdRead) != nil {
			return nil, invalid("AcquireWrite", "ctx holds a read hold on %q: a read hold cannot be upgraded, release it first", key)
		}
	} else if lk := l.reentrantHold(ctx, key, holdRead, holdWrite); lk != nil {
		return lk, nil
	}
	hs, ok := l.store.(holdStore)
	if !ok {
		return nil, invalid("AcquireRead/AcquireWrite", "a Redlock Locker keeps no read-write locks: use New on one deployment")
	}
	if l.watchdog.isClosed() {
		return nil, ErrClosed
	}
	o = o.withDefaults(l.defaults)
	o.Fair = false // writers queue anyway; readers never do
	if err := l.cfg.checkLease("Options.TTL", o.TTL); err != nil {
		return nil, err
	}
	keys := l.keys.holdKeys(key, ":rw") // readers, fence, writer queue
	readers, writer := keys[0], keys[0]+":w"
	h := &holdAcquisition{
		acquisition: acquisition{l: l, key: key, o: o, began: began},
		channel:     readers,
		policy:      wakeAll,
	}
	if o.Wait > 0 {
		h.deadline = began.Add(o.Wait)
	}
	if write {
		h.mint = func() *lockID { return newHoldID(holdWrite, [3]string{writer, keys[1], keys[2]}, o, "w", readers) }
		h.id = h.mint()
		// A writer keeps its place in the queue across attempts; each
		// attempt's grant has a token of its own. Its entry is kept short
		// and renewed with each attempt, so a writer that died stops
		// holding readers up soon.
		h.queues, h.refresh, h.named = true, o.TTL, newToken()
		attemptKeys := []string{writer, keys[1], keys[2], readers}
		h.attempt = func(ctx context.Context, h *holdAcquisition, queueFor time.Duration) (grant, error) {
			return holdGrant(hs.evalHold(ctx, pickRWWrite, attemptKeys, h.id.token, h.id.argv[1], queueFor.Milliseconds(), h.named))
		}
	} else {
		h.mint = func() *lockID { return newHoldID(holdRead, keys, o, "r", readers) }
		h.id = h.mint()
		attemptKeys := []string{readers, keys[1], keys[2], writer}
		h.attempt = func(ctx context.Context, h *holdAcquisition, _ time.Duration) (grant, error) {
			return holdGrant(hs.evalHold(ctx, pickRWRead, attemptKeys, h.id.token, h.id.argv[1]))
		}
	}
	return h.run(ctx)
}

func pickRWRead(hs *holdScripts) *script  { return hs.rwRead }
func pickRWWrite(hs *holdScripts) *script { return hs.rwWrite }
