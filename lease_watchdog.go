package padlock

import (
	"context"
	"sync"
	"time"
)

// watchdog keeps a Locker's held locks alive and says when one is lost. It
// is one goroutine per Locker, started with the first lock that needs it,
// not a goroutine or timer per lock: it sleeps until the earliest event
// among its leases, then sends every renewal that is due as one batch (one
// pipelined round trip per Redis node; batches of at most maxRenewBatch)
// and fires the lost signal of every lock whose trusted lease has run out.
//
// Each renewing lock is extended a third into the span its lease is
// trusted for (TTL/3 when nothing else shortens it). A lock whose renewal is
// due within the next TTL/6 rides along with a batch that goes out anyway,
// while the batch has room, so many locks settle into few round trips
// (maxRenewBatch says how batches beyond one follow). A lock is lost when
// renewal finds its token gone, or when its trusted lease (lease.go: the
// earliest end any change that may have run last could have set, less the
// clock drift margin) runs out with no renewal confirmed, which is how an unreachable
// Redis shows. Every lock is watched, fixed-lease ones (Options.NoRenew)
// too, but those only for their lease's end.
//
// Lock order, where more than one is taken: notifier.mu, then watchdog.mu,
// then Lock.mu. The watchdog's mutex guards its heap and every lease's
// fields; a Lock's own mutex guards only how it ended (lock.go).
type watchdog struct {
	store  store
	margin func(time.Duration) time.Duration

	mu     sync.Mutex
	leases leaseHeap   // by due time
	timer  *time.Timer // wakes the loop at the earliest due time
	next   time.Time   // when timer fires (zero: stopped)
	// pace is how long a full batch takes to renew (a moving average),
	// divided by renewFlights; after a full batch goes out, no other
	// that is not short of trust follows before paceUntil.
	pace      time.Duration
	paceUntil time.Time
	// slot is when the renewals put off for pacing last went, and
	// slotFill how many went there: each one put off waits for the batch
	// it will go in, not for the next tick (see putOff).
	slot     time.Time
	slotFill int
	started  bool
	closed   bool
	ctx      context.Context // cancelled by close, ending renewals in flight
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the loop and the renewal batches in flight
	// late, when set (tests only), says how long the loop oversleeps each
	// wake-up: the explorer's stand-in for a starved runtime.
	late func() time.Duration
}

// maxRenewBatch bounds the renewals one batch carries, so that no
// pipeline holds Redis for long: Redis reads what a connection has sent
// and runs it before it serves another client, about 3ms of its time for
// 250 renewals on a quiet machine (1000 held it for 12ms, and the slowest
// batch at a million locks took 108ms, against 26-40ms with 250). With
// many locks, each tick sends the renewals that are due, the next ones riding along while
// the batch has room; once a batch is full, the next waits a pace (between
// minPace and maxPace): the time a full batch takes to be answered,
// divided by renewFlights, so that about that many full batches are on
// their way at once and they follow each other instead of queueing in
// Redis together. Renewals due beyond a full batch are put off to the
// batches that follow, a pace apart. A renewal whose lease has less than
// TTL/3 of trust left waits for nothing: it goes at once, in a batch of
// its own if need be. Renewals thus go out in step with the times the
// locks were taken, spread over the renewal interval. maxPace keeps the
// paced rate at 20,000 renewals a second or more (250 per 12.5ms) however
// slowly batches are answered, as 1000 per 50ms did: a distant Redis
// answers slowly without being busy.
const (
	maxRenewBatch = 250
	renewFlights  = 2
	minPace       = time.Millisecond
	maxPace       = 12500 * time.Microsecond
)

// Leases whose renewals fail for want of an answer are tried again after
// this fraction of the TTL (and no sooner than retryFloor), until the lease
// is renewed or its trust runs out.
const (
	retryFraction = 10
	retryFloor    = 5 * time.Millisecond
)

func newWatchdog(s store, margin func(time.Duration) time.Duration) *watchdog {
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	return &watchdog{store: s, margin: margin, ctx: ctx, cancel: cancel, timer: timer, pace: minPace}
}

// add starts watching ls. It returns false when the watchdog is closed.
func (w *watchdog) add(ls *lease) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if ls.wdIndex >= 0 {
		return true
	}
	w.schedule(ls)
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

// remove stops watching ls.
func (w *watchdog) remove(ls *lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ls.wdIndex >= 0 {
		w.leases.remove(ls.wdIndex)
	}
}

// stop stops watching ls for good, as a release does, and returns the
// number of a last change to its lease: above every change begun so far,
// so that none of them, still on its way, can undo it (lua/grant.lua).
func (w *watchdog) stop(ls *lease) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ls.wdIndex >= 0 {
		w.leases.remove(ls.wdIndex)
	}
	ls.stopped = true // an Extend that passed its check now finds it let go
	ls.seq++
	return ls.seq
}

// gone handles an answer that id's token no longer holds the lock: unless
// the lease moved on to another grant since (a hand-off, Locker.rename),
// the watchdog stops watching it, and whoever holds it now has lost it.
func (w *watchdog) gone(ls *lease, id *lockID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ls.id == id {
		w.lose(ls, LostTokenGone)
	}
}

// ended stops watching ls if its holder has ended: Lock.Err found its
// trust run out before the watchdog woke to say so. A renewal still on its
// way that then confirms must not keep the key locked for a holder that
// was told it lost it. mu is held.
func (w *watchdog) ended(ls *lease) bool {
	if ls.holder.Err() == nil {
		return false
	}
	if ls.wdIndex >= 0 {
		w.leases.remove(ls.wdIndex)
	}
	return true
}

// lose ends ls as lost for why. mu is held.
func (w *watchdog) lose(ls *lease, why LostCause) {
	if ls.wdIndex >= 0 {
		w.leases.remove(ls.wdIndex)
	}
	ls.holder.lost(why)
}

// begin records a lease change of ttl (0: the lease renewals ask for)
// that holder is about to send (see lease.go); setTTL makes ttl the lease
// later renewals ask for, as Extend does. It returns the change's number
// for settle, and its ttl; ok is false, and nothing is recorded, when
// holder no longer holds the lease (it was handed on meanwhile, or let go
// with ReleaseAfter, whose change must be the last).
func (w *watchdog) begin(ls *lease, holder *Lock, ttl time.Duration, setTTL bool) (seq uint64, _ time.Duration, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ls.holder != holder || ls.stopped {
		return 0, 0, false
	}
	if ttl <= 0 {
		ttl = ls.ttl
	}
	if setTTL {
		ls.ttl = ttl
	}
	seq = ls.begin(ttl, time.Now())
	w.reschedule(ls)
	return seq, ttl, true
}

// settle records the outcome of the change numbered seq: confirmed, or
// unanswered (it may have run, or may run yet).
func (w *watchdog) settle(ls *lease, seq uint64, confirmed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls.settle(seq, confirmed, time.Now())
	w.reschedule(ls)
}

// canHandOver reports whether the lease old holds may be handed on to a
// waiter that asks for a lease of ttl (see handOver).
func (w *watchdog) canHandOver(old *Lock, ttl time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handable(old, ttl)
}

// handable reports whether old's lease may be handed on to a holder that
// asks for ttl: not when the lease is no longer watched (lost, released,
// or the watchdog closed), when old no longer holds it, when ttl is not
// its lease, or when less than half of that is trusted to remain: a lease
// whose renewals are not getting through is not passed on. mu is held.
func (w *watchdog) handable(old *Lock, ttl time.Duration) bool {
	ls := old.lease
	return !w.closed && ls.wdIndex >= 0 && ls.holder == old && ls.ttl == ttl && time.Until(ls.validUntil) >= ls.ttl/2
}

// handOver moves ls, which old holds, on to the lock mk makes: the next
// holder of the same Redis lock (see wait_handoff.go), under the grant next
// that Redis moved it to (renamed), which goes on with its lease and
// renewal schedule. It hands nothing on, and returns nil, when the lease
// may not be handed on (handable), or when the rename was not sent after
// since.
func (w *watchdog) handOver(old *Lock, next *lockID, ttl time.Duration, since time.Time, mk func() *Lock) *Lock {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls := old.lease
	if !w.handable(old, ttl) || ls.id != next || !ls.confirmedSince(since) {
		return nil
	}
	nl := mk()
	nl.lease, ls.holder = ls, nl
	return nl
}

// renamed records that Redis ran change seq, which moved ls's lock to the
// grant next (Locker.rename): from now on its renewals name next. A
// renewal of the former grant still on its way is a stranger there, and
// changes nothing.
func (w *watchdog) renamed(ls *lease, seq uint64, next *lockID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls.settle(seq, true, time.Now())
	ls.id = next
	w.reschedule(ls)
}

// reschedule places ls in the heap anew after its times changed, if it is
// watched. mu is held.
func (w *watchdog) reschedule(ls *lease) {
	if ls.wdIndex >= 0 {
		w.schedule(ls)
	}
}

// schedule (re)places ls in the heap after its times changed. mu is held.
func (w *watchdog) schedule(ls *lease) {
	due := ls.validUntil
	if ls.renew && !ls.inFlight && ls.renewAt.Before(due) {
		due = ls.renewAt
	}
	w.leases.set(ls, due)
	w.arm(due)
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
			if w.late != nil {
				time.Sleep(w.late())
			}
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
	var batch []renewal
	paced := now.Before(w.paceUntil) // a full batch went out just now
	for len(w.leases) > 0 {
		ls, due := w.leases[0].ls, w.leases[0].time()
		// A lease due within TTL/6 rides along while the batch has room.
		room := len(batch) < maxRenewBatch && !paced
		early := ls.renew && !ls.inFlight && due.Sub(now) <= ls.ttl/6 && room
		if due.After(now) && !early {
			break
		}
		if !now.Before(ls.validUntil) {
			w.lose(ls, LostExpired)
			continue
		}
		if w.ended(ls) {
			continue
		}
		if !room {
			if ls.validUntil.Sub(now) > ls.ttl/3 {
				// Due, with time to spare: it goes in a later batch,
				// once Redis has had time for this one (no room means a
				// full batch went or is going, which set the pace).
				w.putOff(ls)
				continue
			}
			// Running short of trust: it goes now, in a batch of its own
			// if this one is full.
			if len(batch) == maxRenewBatch {
				w.wg.Add(1)
				go w.renew(batch)
				batch = nil
			}
		}
		ls.inFlight = true
		planned := ls.renewAt
		// Begun at now, before it is sent: the trust it gives can only be
		// less than the truth.
		seq := ls.begin(ls.ttl, now)
		batch = append(batch, renewal{id: ls.id, ttl: ls.ttl, deadline: ls.validUntil, lease: ls, seq: seq, planned: planned, sent: now})
		w.schedule(ls)
		if len(batch) == maxRenewBatch && !paced {
			// A full batch: the next waits for its turn.
			w.paceUntil, paced = now.Add(w.pace), true
		}
	}
	if len(batch) > 0 {
		w.wg.Add(1)
		go w.renew(batch)
	}
	w.next = time.Time{}
	if len(w.leases) > 0 {
		w.arm(w.leases[0].time())
	}
}

// putOff schedules the renewal of ls, due but with time to spare, in the
// first batch after paceUntil that has room: the renewals put off fill the
// batches that follow, one pace apart, in the order they fell due. Each is
// put off once, not at every tick until its batch goes, so a tick costs
// in proportion to the renewals it sends, however many wait. A renewal is
// never put off past the moment its lease runs short of trust (TTL/3
// left): it then goes at once. mu is held.
func (w *watchdog) putOff(ls *lease) {
	if w.slot.Before(w.paceUntil) {
		w.slot, w.slotFill = w.paceUntil, 0
	} else if w.slotFill >= maxRenewBatch {
		w.slot, w.slotFill = w.slot.Add(w.pace), 0
	}
	at, short := w.slot, ls.validUntil.Add(-ls.ttl/3)
	if short.Before(at) {
		at = short
	} else {
		w.slotFill++
	}
	ls.renewAt = at
	w.schedule(ls)
}

// renew sends one batch and applies the results of each node's renewals
// as soon as that node answers. The store waits for a node no longer than
// the earliest trusted-lease end among its renewals (their deadline):
// after that, an answer comes too late for at least one of its locks, and
// the loop fires its lost signal.
func (w *watchdog) renew(batch []renewal) {
	defer w.wg.Done()
	start := time.Now()
	w.store.renew(w.ctx, batch, func(idx []int) {
		w.mu.Lock()
		defer w.mu.Unlock()
		now := time.Now()
		for _, i := range idx {
			w.renewed(&batch[i], now)
		}
	})
	if len(batch) == maxRenewBatch {
		w.mu.Lock()
		w.pace = min(max((3*w.pace+time.Since(start)/renewFlights)/4, minPace), maxPace)
		w.mu.Unlock()
	}
}

// renewed applies the result of r, known at now, to its lease. mu is held.
func (w *watchdog) renewed(r *renewal, now time.Time) {
	ls := r.lease
	ls.inFlight = false
	if r.id != ls.id {
		// The lease moved on to another grant while the renewal was on
		// its way (a hand-off): whatever it did, it did before the move,
		// which reset the lease; and it can do nothing after it.
		ls.drop(r.seq)
		w.reschedule(ls)
		return
	}
	if w.ended(ls) {
		// Nothing to keep renewing; observers still hear how it went.
		if r.ok || r.err != nil {
			observeRenewal(r, now)
		}
		return
	}
	switch {
	case r.err == nil && r.ok:
		ls.settle(r.seq, true, now)
		ls.renewals++
		observeRenewal(r, now)
	case r.err == nil: // the token is gone
		if ls.wdIndex >= 0 {
			w.lose(ls, LostTokenGone)
		}
		return
	default: // no answer: it may have run; try again soon, until validUntil
		ls.settle(r.seq, false, now)
		ls.renewAt = now.Add(max(r.ttl/retryFraction, retryFloor))
		observeRenewal(r, now)
	}
	w.reschedule(ls) // unless released meanwhile
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
	for len(w.leases) > 0 {
		w.leases.pop().holder.lost(LostClosed)
	}
}

// leaseHeap orders leases by due time, the earliest first; each lease
// knows its index. An entry carries its lease's due time, so that ordering
// reads the heap's own memory only: with a million leases, following each
// entry to its lease at every comparison took a quarter of the client's
// CPU in cache misses.
type leaseHeap []leaseEntry

type leaseEntry struct {
	due int64 // the watchdog's next event for ls, on the monotonic clock (since monoBase)
	ls  *lease
}

// time returns the entry's due time.
func (e leaseEntry) time() time.Time { return monoBase.Add(time.Duration(e.due)) }

// set places ls in the heap, due at t, or moves it there if it is in it.
func (h *leaseHeap) set(ls *lease, t time.Time) {
	due := int64(t.Sub(monoBase))
	i := ls.wdIndex
	if i < 0 {
		i = len(*h)
		*h = append(*h, leaseEntry{due, ls})
		ls.wdIndex = i
	} else {
		(*h)[i].due = due
	}
	if !h.up(i) {
		h.down(i)
	}
}

// remove takes the entry at i out of the heap.
func (h *leaseHeap) remove(i int) {
	old := *h
	n := len(old) - 1
	old[i].ls.wdIndex = -1
	if i != n {
		old[i] = old[n]
		old[i].ls.wdIndex = i
	}
	old[n] = leaseEntry{}
	*h = old[:n]
	if i != n && !h.up(i) {
		h.down(i)
	}
}

// pop takes the earliest lease out of the heap.
func (h *leaseHeap) pop() *lease {
	ls := (*h)[0].ls
	h.remove(0)
	return ls
}

// up moves the entry at i towards the root while it is due before its
// parent, and reports whether it moved.
func (h leaseHeap) up(i int) bool {
	e, start := h[i], i
	for i > 0 {
		p := (i - 1) / 2
		if h[p].due <= e.due {
			break
		}
		h[i] = h[p]
		h[i].ls.wdIndex = i
		i = p
	}
	h[i] = e
	e.ls.wdIndex = i
	return i != start
}

// down moves the entry at i towards the leaves while a child is due
// before it.
func (h leaseHeap) down(i int) {
	e, n := h[i], len(h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].due < h[c].due {
			c = r
		}
		if h[c].due >= e.due {
			break
		}
		h[i] = h[c]
		h[i].ls.wdIndex = i
		i = c
	}
	h[i] = e
	e.ls.wdIndex = i
}
