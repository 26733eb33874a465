package padlock

import (
	"slices"
	"time"
)

// Hand-off: how a Locker serves its own waiters without giving the lock
// back to Redis.
//
// When a holder releases a lock that a waiter of the same Locker is waiting
// for, the Redis lock does not have to go back to Redis at all: the Locker
// passes it on. The waiter gets a new Lock on the same Redis key and owner
// token, with the next fence, and the watchdog goes on renewing the lease
// it was renewing. The one command sent confirms that Redis still holds
// the lock (see handOff), so the lock changes hands in one round trip,
// where a release and a new acquisition would take two, and the waiter
// needs no notice. Local waiters are served in arrival order.
//
// Fences stay strict. An attempt of a waiting Acquire that takes the lock
// from Redis reserves a block of handoffBlock fences, and each hand-off
// uses the next. When the block is used up the lock goes back to Redis
// with an ordinary release, and the next holder takes it, and a new block,
// from there. The block is the same size however many waiters are queued
// when it is taken: the holder that hands the lock on usually queues again
// behind the others, so a block sized to the line of the moment would send
// the lock back to Redis every few hand-offs on a key with few waiters.
// Reserving costs nothing but numbers: the counter follows the server
// clock in µs, and a block carries it at most handoffBlock-1 µs ahead
// (lua/acquire.lua). A single attempt (no wait budget) reserves one.
//
// Other Lockers are not shut out: Lockers take turns. A waiter whose
// attempt finds the key busy publishes a "want" notice naming its Locker,
// and the holder's Locker hears it (it listens on the key's channel while
// it has waiters). A turn begins when a Locker's waiter takes the key from
// Redis (an attempt, or a grant at release) and covers the waiters queued
// in that Locker behind it then: they are handed the key one after the
// other, as in a Locker alone, whoever asks meanwhile (waiter.inTurn).
// Once they are served, a release that another Locker wants the key for
// gives it back to Redis, which grants it to the bid of the Locker whose
// id follows the releaser's, in the circular order of the ids (wait_bid.go).
// So with several processes competing each serves the waiters it had
// queued, then the next process has its turn, round robin: a waiter waits
// at most one turn of each other process that wants the key, a turn being
// as long as that process's line when it began (and at most a block of
// fences), which on a steady load is about one hold of every waiter
// queued before it, as in one FIFO line; and most hand-offs stay within a
// process, where the next holder needs no notice. (Serving one waiter per
// turn instead put every hand-off across processes, at 0.86-0.93x the
// rate of one process; see docs/benchmarks.md.)
//
// Where no grant is made (with Config.ReplicaAcks), or when the lock goes
// back to Redis for another reason (its block used up, the next local
// waiter unable to take it), the release yields instead:
// rather than delete the key it leaves a marker for yieldWindow that only
// the waiters of the wanting Locker next in that order may replace with
// their lock (acquire.lua). If that Locker's waiter does not come within
// the window, the marker expires and anyone may take the key.
//
// A lock is handed on only to a waiter that asked for it before Redis last
// confirmed the lease (see handOff), when the next waiter asked for the same lease
// and renewal (a fixed lease, Options.NoRenew, is the caller's promise that
// the key stays locked that long from its own Acquire), when its trusted
// lease has at least half its TTL to run and it is not known to be lost,
// and never on a Redlock Locker. In fair mode the queue in Redis decides:
// a fair lock is handed on only to the waiter at its head (see
// fairCandidate below).
const (
	handoffBlock = 32
	yieldWindow  = 20 * time.Millisecond
)

// giveBack says how a release gives the lock back to Redis. The zero
// value deletes the key and publishes a release notice only if a waiter
// marked the lock (acquire.lua).
type giveBack struct {
	notify  bool          // publish a notice anyway: the Locker has waiters of its own
	yieldTo string        // leave a marker only this Locker's waiters may take...
	window  time.Duration // ...for this long
	// withdraw: the token released is an attempt's, whose bid, if it left
	// one, is withdrawn (wait_bid.go).
	withdraw bool
	// bury: the token released is a waiting attempt's whose reply was
	// lost: its bid is withdrawn, and a copy of it that comes later still
	// is refused (lua/claim.lua).
	bury bool
	// bid: the Locker's next bid, for its first waiter, placed by the
	// release if it grants the key to another Locker's (wait_bid.go).
	bid *releaseBid
}

// handOff passes lk, whose holder is releasing it, to the first local
// waiter for its key if it can, finishing lk. Otherwise it says how the
// release must give the lock back to Redis: yielding, when waiters of
// other Lockers want the key, and with a notice, when local waiters wait
// for one.
//
// A hand-off is a grant of its own, with a token of its own: called with
// next nil, handOff returns, when a waiter could take the lock, the
// identity of that grant in next, and the releasing caller moves the lock
// in Redis from lk's token to next's with one round trip (Locker.rename)
// and asks again, with next. That round trip is also what confirms that
// Redis still holds the lock: a lock Redis lost meanwhile (a restart
// without persistence, a failover, an eviction) is never passed on, since
// the rename finds the token gone and the lock is lost instead. It must be
// sent after the waiter asked for the lock, so that nobody else can have
// taken the key between its asking and its getting it, and its fence is
// above that of every lock whose Acquire returned before it asked; a
// waiter that came after it is not handed the lock, which then goes back
// to Redis under next's token.
func (l *Locker) handOff(lk *Lock, releasing time.Time, next *lockID) (handed bool, g giveBack, rename *lockID) {
	n := l.notifier
	if n.waited.Load() == 0 {
		// Nobody waits here. A waiter that joins now tried the key first
		// and marked it, so the release still tells it.
		return false, g, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := n.keys[lk.id.lockKey()]
	if kw == nil || len(kw.waiters) == 0 {
		return false, g, nil
	}
	g.notify = true
	if l.cfg.redlock || lk.id.fair || !lk.lease.renew {
		return false, g, nil
	}
	// Lockers take turns: this Locker has served the waiters it had when
	// its turn began, and another one's waiter asked for the key.
	turnOver := l.bids && !kw.waiters[0].inTurn && nextInTurn(l.id, kw.wanters, time.Now().Add(-2*l.recheck)) != ""
	if next == nil && turnOver {
		// The key goes back to Redis, which grants it to that waiter's
		// bid (wait_bid.go), before this Locker hands it to its own
		// again, for which the release bids.
		clear(kw.wanters)
		g.bid = kw.nextBid()
		return false, g, nil
	}
	// (With next, a waiter that came to the front since the rename began,
	// after the turn's last, is not handed it either.)
	if w := kw.waiters[0]; !turnOver && lk.fence < lk.fenceEnd && w.parked && w.handed == nil && !w.a.o.Fair && !w.a.o.NoRenew && lk.Err() == nil {
		if next == nil {
			if l.watchdog.canHandOver(lk, w.a.o.TTL) {
				return false, g, mintOn(lk.id.keys, w.a.o)
			}
		} else if ownerOf(next.token) == w.a.o.Owner {
			// Renamed after the release began, and after the waiter asked.
			// (next was made for the first waiter then; one that came to
			// the front since gets it only if it names the same owner.)
			since := releasing
			if w.a.began.After(since) {
				since = w.a.began
			}
			if nl := l.watchdog.handOver(lk, next, w.a.o.TTL, since, func() *Lock {
				return &Lock{locker: l, key: w.a.key, id: next, fence: lk.fence + 1, fenceEnd: lk.fenceEnd, since: time.Now()}
			}); nl != nil {
				// The releasing handle ends before the next holder wakes:
				// from then on its Err, Extend, TTL and contexts say it let
				// go.
				lk.finish(ErrReleased)
				w.handed, w.parked = nl, false
				w.signal()
				return true, g, nil
			}
		}
	}
	if to := nextInTurn(l.id, kw.wanters, time.Now().Add(-2*l.recheck)); to != "" {
		g.yieldTo, g.window = to, l.yield
	}
	if next != nil && l.bids {
		// The rename spent this Locker's bid (handover.lua), for a waiter
		// that does not take the lock after all: the release bids again
		// for the first waiter still here, or the grant it makes to
		// another Locker's bid would cost this Locker's waiters their
		// turn (the next release would find no bid of theirs).
		g.bid = kw.nextBid()
	}
	clear(kw.wanters)
	return false, g, nil
}

// nextInTurn returns the id among wanters that asked since fresh and
// follows self in the circular order of ids: the smallest one above self,
// or else the smallest; "" when none is left. A Locker whose waiters still
// wait asks again at least every recheck, when its first waiter looks
// again; an older want is from waiters that were served or gave up.
func nextInTurn(self string, wanters map[string]time.Time, fresh time.Time) string {
	var above, lowest string
	for id, at := range wanters {
		if at.Before(fresh) {
			continue
		}
		if id > self && (above == "" || id < above) {
			above = id
		}
		if lowest == "" || id < lowest {
			lowest = id
		}
	}
	if above != "" {
		return above
	}
	return lowest
}

// A fair lock is handed on within its Locker too, but only to the waiter
// whose turn it is in Redis: the oldest live entry of the key's queue.
// The Locker cannot know which that is, so the releasing holder names
// the first of its own fair waiters that may take the lock (fairCandidate)
// and the one round trip of the hand-off (lua/handover_fair.lua) checks
// that the head of the queue is that waiter's place. If it is, the key
// moves to the waiter's grant token, the place leaves the queue and a
// fence is taken from the counter, as an attempt would; if not, the same
// round trip releases the lock and its notice wakes the head, wherever it
// waits. A local waiter further back never jumps the head, and a waiter
// of another Locker queued earlier goes first.
//
// The rules of the default hand-off hold (see handOff): same lease and
// renewal asked, the holder's lease trusted for half its TTL, the rename
// sent after the waiter asked. A waiter that the script took off the
// queue but that cannot take the lock after all (the rename's reply was
// lost, its lease may no longer be handed on) asks to be queued again.

// fairCandidate returns the waiter a fair lock lk, whose holder is
// releasing it, may be handed to within the Locker, and the identity of
// the grant it would get: the first local fair waiter for the key that
// sleeps and asked for the same lease, with renewal. It returns nil when
// there is none.
func (l *Locker) fairCandidate(lk *Lock) (*waiter, *lockID) {
	n := l.notifier
	if n.waited.Load() == 0 || l.cfg.redlock || !lk.lease.renew {
		return nil, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := n.keys[lk.id.lockKey()]
	if kw == nil || kw.wake != wakeMutex || lk.Err() != nil {
		return nil, nil
	}
	for _, w := range kw.waiters {
		if w.a.o.Fair && !w.a.o.NoRenew && w.parked && w.handed == nil && !w.requeue && l.watchdog.canHandOver(lk, w.a.o.TTL) {
			return w, mintOn(lk.id.keys, w.a.o)
		}
	}
	return nil, nil
}

// handFair gives the lease of lk, which Redis now holds under next with
// fence (handover_fair.lua ran), to the waiter w as a new Lock, finishing
// lk, and wakes w. It returns false, handing nothing on, when w has left
// the line, or when the lease may not be handed on (watchdog.handOver);
// then w, if still in line, asks to be queued again.
func (l *Locker) handFair(lk *Lock, w *waiter, next *lockID, fence int64, releasing time.Time) bool {
	n := l.notifier
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Contains(w.kw.waiters, w) {
		return false // it gave up: its place went with the hand-off
	}
	// Renamed after the release began, and after the waiter asked.
	since := releasing
	if w.a.began.After(since) {
		since = w.a.began
	}
	nl := l.watchdog.handOver(lk, next, w.a.o.TTL, since, func() *Lock {
		return &Lock{locker: l, key: w.a.key, id: next, fence: fence, fenceEnd: fence, since: time.Now()}
	})
	if nl == nil {
		w.requeue, w.parked = true, false
		w.signal()
		return false
	}
	// As in handOff: the releasing handle ends before the next holder
	// wakes. A waiter awake now (its timer fired during the rename) finds
	// the lock when it sleeps again, or lets it go as it leaves
	// (notifier.unclaimed).
	lk.finish(ErrReleased)
	w.handed, w.parked = nl, false
	w.signal()
	return true
}

// requeueFair tells w, if it is still in line, to ask to be queued again:
// a hand-off to it whose reply was lost may have taken it off the queue.
func (l *Locker) requeueFair(w *waiter) {
	n := l.notifier
	n.mu.Lock()
	defer n.mu.Unlock()
	if slices.Contains(w.kw.waiters, w) {
		w.requeue, w.parked = true, false
		w.signal()
	}
}
