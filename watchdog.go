package padlock

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// watchdog keeps a Locker's held locks alive and says when one is lost. It
// is one goroutine per Locker, started with the first lock that needs it,
// not a goroutine or timer per lock: it sleeps until the earliest event
// among its locks, then sends every renewal that is due as one batch (one
// pipelined round trip per Redis node) and fires the lost signal of every
// lock whose trusted lease has run out.
//
// Each renewing lock is extended every TTL/3. A lock whose renewal is due
// within the next TTL/6 rides along with a batch that goes out anyway, so
// many locks settle into few round trips. A lock is lost when renewal finds
// its token gone, or when its trusted lease (validUntil: TTL less the clock
// drift margin, counted from when the last successful acquire or extend was
// sent) runs out with no renewal confirmed, which is how an unreachable
// Redis shows. Fixed-lease locks (Options.NoRenew) are watched only once
// someone asks for Done or Context, and only for their lease's end.
type watchdog struct {
	store  store
	margin func(time.Duration) time.Duration

	mu      sync.Mutex
	locks   lockHeap    // by due time; guarded by mu, as are the Locks' watchdog fields
	timer   *time.Timer // wakes the loop at the earliest due time
	next    time.Time   // when timer fires (zero: stopped)
	started bool
	closed  bool
	ctx     context.Context // cancelled by close, ending renewals in flight
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the loop and the renewal batches in flight
}

// Locks' renewals that fail for want of an answer are tried again after
// this fraction of the TTL (and no sooner than retryFloor), until the lock
// is renewed or its trusted lease runs out.
const (
	retryFraction = 10
	retryFloor    = 5 * time.Millisecond
)

func newWatchdog(s store, margin func(time.Duration) time.Duration) *watchdog {
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	return &watchdog{store: s, margin: margin, ctx: ctx, cancel: cancel, timer: timer}
}

// add starts watching lk. It returns false when the watchdog is closed.
func (w *watchdog) add(lk *Lock) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if lk.wdIndex >= 0 {
		return true
	}
	lk.renewAt = lk.renewBase.Add(lk.ttl / 3)
	w.schedule(lk)
	if !w.started {
		w.started = true
		w.wg.Add(1)
		go w.run()
	}
	return true
}

// isClosed reports whether close has run.
func (w *watchdog) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// remove stops watching lk.
func (w *watchdog) remove(lk *Lock) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if lk.wdIndex >= 0 {
		heap.Remove(&w.locks, lk.wdIndex)
	}
}

// handOver moves old's place in the watchdog to the lock mk makes: the next
// holder of the same Redis lock (see handoff.go), which goes on with old's
// lease and renewal schedule. It returns nil, changing nothing, when old is
// no longer watched (lost, released, or the watchdog closed), when ttl is
// not old's current lease, or when less than half of that is trusted to
// remain: a lease whose renewals are not getting through is not passed on.
func (w *watchdog) handOver(old *Lock, ttl time.Duration, mk func() *Lock) *Lock {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || old.wdIndex < 0 || old.ttl != ttl || time.Until(old.validUntil) < old.ttl/2 {
		return nil
	}
	next := mk()
	next.ttl, next.validUntil, next.renewBase, next.renewAt = old.ttl, old.validUntil, old.renewBase, old.renewAt
	next.due, next.inFlight, next.extends = old.due, old.inFlight, old.extends
	next.wdIndex, w.locks[old.wdIndex] = old.wdIndex, next
	old.wdIndex, old.successor = -1, next
	return next
}

// extended records that lk's lease was reset to ttl by a command sent at
// sent.
func (w *watchdog) extended(lk *Lock, ttl time.Duration, sent time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for lk.successor != nil { // handed on while the Extend was out
		lk = lk.successor
	}
	lk.ttl = ttl
	// Unconditionally: a shorter Extend shortens the lease in Redis, and
	// the trusted lease must follow it down.
	lk.validUntil = sent.Add(ttl - w.margin(ttl))
	lk.extends++
	lk.renewBase = sent
	lk.renewAt = sent.Add(ttl / 3)
	if lk.wdIndex >= 0 {
		w.schedule(lk)
	}
}

// schedule (re)places lk in the heap after its times changed. mu is held.
func (w *watchdog) schedule(lk *Lock) {
	lk.due = lk.validUntil
	if lk.renew && !lk.inFlight && lk.renewAt.Before(lk.due) {
		lk.due = lk.renewAt
	}
	if lk.wdIndex >= 0 {
		heap.Fix(&w.locks, lk.wdIndex)
	} else {
		heap.Push(&w.locks, lk)
	}
	w.arm(lk.due)
}

// arm makes the timer fire by t, resetting it only when t is earlier than
// it was set for: a lock taken and released in the meantime costs the loop
// nothing, not even a wake-up. mu is held.
func (w *watchdog) arm(t time.Time) {
	if w.next.IsZero() || t.Before(w.next) {
		w.next = t
		w.timer.Reset(max(time.Until(t), 0))
	}
}

func (w *watchdog) run() {
	defer w.wg.Done()
	for {
		select {
		case <-w.timer.C:
			w.tick(time.Now())
		case <-w.ctx.Done():
			return
		}
	}
}

// tick handles every event that is due at now and sets the timer for the
// next one.
func (w *watchdog) tick(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var (
		batch []renewal
		locks []*Lock
	)
	for len(w.locks) > 0 {
		lk := w.locks[0]
		early := lk.renew && !lk.inFlight && lk.due.Sub(now) <= lk.ttl/6
		if lk.due.After(now) && !early {
			break
		}
		if !now.Before(lk.validUntil) {
			heap.Pop(&w.locks)
			lk.finish(ErrLockLost)
			continue
		}
		lk.inFlight = true
		batch = append(batch, renewal{id: lk.id, ttl: lk.ttl, extends: lk.extends, deadline: lk.validUntil})
		locks = append(locks, lk)
		w.schedule(lk)
	}
	if len(batch) > 0 {
		w.wg.Add(1)
		go w.renew(batch, locks)
	}
	w.next = time.Time{}
	if len(w.locks) > 0 {
		w.arm(w.locks[0].due)
	}
}

// renew sends one batch and applies the results of each node's renewals
// as soon as that node answers. The store waits for a node no longer than
// the earliest trusted-lease end among its renewals (their deadline):
// after that, an answer comes too late for at least one of its locks, and
// the loop fires its lost signal.
func (w *watchdog) renew(batch []renewal, locks []*Lock) {
	defer w.wg.Done()
	sent := time.Now()
	w.store.renew(w.ctx, batch, func(idx []int) {
		w.mu.Lock()
		defer w.mu.Unlock()
		now := time.Now()
		for _, i := range idx {
			w.renewed(locks[i], batch[i], sent, now)
		}
	})
}

// renewed applies the result of r, sent at sent, to lk. mu is held.
func (w *watchdog) renewed(lk *Lock, r renewal, sent, now time.Time) {
	for lk.successor != nil { // handed on while the renewal was out
		lk = lk.successor
	}
	lk.inFlight = false
	if lk.wdIndex < 0 { // released meanwhile
		return
	}
	switch {
	case r.err == nil && r.ok && r.extends != lk.extends:
		// An Extend ran while this renewal was on its way, and the
		// renewal may have landed after it, resetting the lease in
		// Redis to the older length: trust the shorter of the two, and
		// renew with the current length at once.
		lk.validUntil = minTime(lk.validUntil, sent.Add(r.ttl-w.margin(r.ttl)))
		lk.renewAt = now
	case r.err == nil && r.ok:
		if v := sent.Add(r.ttl - w.margin(r.ttl)); v.After(lk.validUntil) {
			lk.validUntil = v
		}
		lk.renewBase = sent
		lk.renewAt = sent.Add(r.ttl / 3)
	case r.err == nil: // the token is gone
		heap.Remove(&w.locks, lk.wdIndex)
		lk.finish(ErrLockLost)
		return
	default: // no answer: try again soon, until validUntil
		lk.renewAt = now.Add(max(r.ttl/retryFraction, retryFloor))
	}
	w.schedule(lk)
}

// close stops the loop and waits for renewals in flight, then fires the
// lost signal of every lock it still watched: nobody renews them any more.
func (w *watchdog) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.cancel()
	w.timer.Stop()
	w.mu.Unlock()
	w.wg.Wait()

	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.locks) > 0 {
		heap.Pop(&w.locks).(*Lock).finish(ErrLockLost)
	}
}

// lockHeap orders locks by due time; each Lock knows its index.
type lockHeap []*Lock

func (h lockHeap) Len() int           { return len(h) }
func (h lockHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h lockHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].wdIndex, h[j].wdIndex = i, j
}
func (h *lockHeap) Push(x any) {
	lk := x.(*Lock)
	lk.wdIndex = len(*h)
	*h = append(*h, lk)
}
func (h *lockHeap) Pop() any {
	old := *h
	lk := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	lk.wdIndex = -1
	return lk
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
