package padlock

import (
	"sync/atomic"
	"time"
)

// lease is what a Locker knows of one lock's lease in Redis: when it surely
// runs until, and when to renew it. It belongs to the lock in Redis, not to
// a holder: a hand-off (handoff.go) moves it on to the next holder with its
// schedule and its history. The watchdog owns it: every field is guarded by
// watchdog.mu.
//
// The lease in force in Redis is the one the last lease change that Redis
// ran set: the acquire, a renewal or an Extend, each "ttl from when it ran".
// The client cannot always tell which ran last. Two changes in flight at
// once (a renewal and an Extend, or two Extends) may run in either order,
// and a change whose reply was lost may have run, or may still run later
// (a server stopped with the command unread in its socket runs it when it
// resumes). So the trusted end is the earliest end that any change which
// may have run last could have set, less the drift margin:
//
//   - The anchor is the confirmed change (Redis answered that the token held
//     the lock and the lease was reset) that was sent last. It ran after it
//     was sent, so if it ran last the lease ends after anchor.sent + its ttl.
//   - A change that may have run after the anchor ran no earlier than the
//     anchor was sent, nor than it was itself sent: it sets an end after
//     max(its send, anchor.sent) + its ttl. Such are changes still
//     unanswered, lost ones, and confirmed ones answered after the anchor
//     was sent (open).
//   - A change answered before the anchor was sent ran before the anchor,
//     and counts no longer. A lost change sent before the anchor never
//     stops counting (it may still run), but from then on only its ttl
//     matters, measured from the anchor (lostTTL).
//
// So a shorter Extend shortens the trust the moment it is sent, whatever
// order the replies come back in.
//
// Where Redis orders the changes (ordered: every grant on one deployment,
// lua/grant.lua and lua/hold_extend.lua), a change numbered below one Redis
// applied is refused, so once a change is confirmed every change numbered
// below it is done with: it ran before, or never will. The anchor is then
// the confirmed change with the highest number, and only changes numbered
// above it count: a lost shorter Extend stops bounding the trust as soon
// as a later change is confirmed. On Redlock, whose changes are judged
// across nodes, a lost change keeps the trust short for as long as the
// lock is held.
type lease struct {
	id     *lockID
	holder *Lock // the Lock that holds the lease now
	renew  bool  // the watchdog extends it while held (not Options.NoRenew)
	// inFlight belongs to the watchdog's schedule below, but sits beside
	// renew so that the two share one word: a Lock embeds its lease, and
	// is allocated once per lock cycle (see TestLockSizeClass).
	inFlight bool // a renewal is on its way
	ordered  bool // Redis refuses a change numbered below one it applied
	stopped  bool // let go for good (watchdog.stop): no change begins on it any more
	ttl      time.Duration
	margin   func(ttl time.Duration) time.Duration

	anchor  leaseChange
	open    []leaseChange // changes that may have run after the anchor
	lostTTL time.Duration // shortest lost change sent before the anchor; 0: none
	seq     uint64        // numbers the changes begun so far

	validUntil time.Time // monotonic: the lease surely runs until then
	// ends is validUntil on the monotonic clock (since monoBase), for
	// readers that hold no lock: Lock.Err reports a lock lost the moment
	// its trust runs out, whether or not the watchdog has woken yet.
	ends atomic.Int64

	// The watchdog's schedule.
	renewAt  time.Time // when the next renewal is due
	due      time.Time // the watchdog's next event for this lease
	renewals int       // renewals confirmed, for observers and Locker.Held
	wdIndex  int       // position in the watchdog's heap, -1 if absent
}

// leaseChange is one command that resets the lease in Redis.
type leaseChange struct {
	seq      uint64
	sent     time.Time
	ttl      time.Duration
	answered time.Time // when Redis confirmed it; zero if it did not (yet)
	lost     bool      // no answer came: it may have run, or may run yet
}

// init starts the lease of a lock that an acquire sent at sent, with lease
// ttl, took; its reply came at answered.
func (ls *lease) init(id *lockID, holder *Lock, ttl time.Duration, renew bool, sent, answered time.Time, margin func(time.Duration) time.Duration) {
	*ls = lease{id: id, holder: holder, renew: renew, ttl: ttl, margin: margin, wdIndex: -1}
	ls.anchor = leaseChange{sent: sent, ttl: ttl, answered: answered}
	ls.trust()
	ls.renewAt = ls.renewTime()
}

// begin records that a change to a lease of ttl is sent at sent (or just
// after), and returns its number for settle. The trust drops at once if
// the change may shorten the lease.
func (ls *lease) begin(ttl time.Duration, sent time.Time) uint64 {
	ls.seq++
	ls.open = append(ls.open, leaseChange{seq: ls.seq, sent: sent, ttl: ttl})
	ls.trust()
	ls.renewAt = minTime(ls.renewAt, ls.renewTime())
	return ls.seq
}

// settle records the outcome of change seq, answered at now: confirmed, or
// not answered (lost: it may have run). A change whose answer was that the
// token is gone settles nothing: the lock is lost.
func (ls *lease) settle(seq uint64, confirmed bool, now time.Time) {
	i := ls.find(seq)
	if i < 0 {
		return
	}
	if !confirmed {
		if ls.ordered && seq < ls.anchor.seq {
			ls.drop(seq) // refused if it runs: a later change ran
			return
		}
		ls.open[i].lost = true
		ls.trust()
		return
	}
	c := ls.open[i]
	c.answered = now
	if ls.ordered {
		ls.settleOrdered(i, c)
		return
	}
	if !c.sent.After(ls.anchor.sent) {
		// Sent before the anchor, answered after: it may have run last.
		ls.open[i] = c
		ls.trust()
		return
	}
	ls.open = append(ls.open[:i], ls.open[i+1:]...)
	if old := ls.anchor; old.answered.After(c.sent) {
		ls.open = append(ls.open, old) // it may have run after c
	}
	ls.anchor = c
	keep := ls.open[:0]
	for _, e := range ls.open {
		switch {
		case e.lost && e.sent.Before(c.sent):
			if ls.lostTTL == 0 || e.ttl < ls.lostTTL {
				ls.lostTTL = e.ttl
			}
		case !e.answered.IsZero() && e.answered.Before(c.sent):
			// It ran before the anchor was sent.
		default:
			keep = append(keep, e)
		}
	}
	clear(ls.open[len(keep):])
	ls.open = keep
	ls.trust()
	ls.renewAt = ls.renewTime()
}

// settleOrdered records that Redis confirmed c, open[i], on a lease whose
// changes Redis orders: the change with the highest number confirmed is
// the anchor, and every change numbered below it is done with.
func (ls *lease) settleOrdered(i int, c leaseChange) {
	ls.open = append(ls.open[:i], ls.open[i+1:]...)
	if c.seq < ls.anchor.seq {
		// A later change is confirmed already: this one ran before it (or
		// was refused, as one numbered below a change Redis applied).
		ls.trust()
		return
	}
	ls.anchor = c
	keep := ls.open[:0]
	for _, e := range ls.open {
		if e.seq > c.seq {
			keep = append(keep, e)
		}
	}
	clear(ls.open[len(keep):])
	ls.open = keep
	ls.lostTTL = 0
	ls.trust()
	ls.renewAt = ls.renewTime()
}

// drop forgets change seq, which can no longer run: it named a grant the
// lease has moved on from.
func (ls *lease) drop(seq uint64) {
	if i := ls.find(seq); i >= 0 {
		ls.open = append(ls.open[:i], ls.open[i+1:]...)
		ls.trust()
	}
}

func (ls *lease) find(seq uint64) int {
	for i := range ls.open {
		if ls.open[i].seq == seq {
			return i
		}
	}
	return -1
}

// trust sets validUntil from the anchor and the changes that may have run
// after it.
func (ls *lease) trust() {
	a := ls.anchor
	v := a.sent.Add(a.ttl - ls.margin(a.ttl))
	if ls.lostTTL > 0 {
		v = minTime(v, a.sent.Add(ls.lostTTL-ls.margin(ls.lostTTL)))
	}
	for _, e := range ls.open {
		from := e.sent
		if from.Before(a.sent) {
			from = a.sent
		}
		v = minTime(v, from.Add(e.ttl-ls.margin(e.ttl)))
	}
	ls.validUntil = v
	ls.ends.Store(int64(v.Sub(monoBase)))
}

// monoBase is a fixed instant to measure monotonic times from.
var monoBase = time.Now()

// expired reports whether the lease's trust has run out, without a lock.
func (ls *lease) expired() bool { return int64(time.Since(monoBase)) >= ls.ends.Load() }

// renewTime is when a lease that was last confirmed at the anchor is
// renewed: a third into the span it is trusted for.
func (ls *lease) renewTime() time.Time {
	return ls.anchor.sent.Add(ls.validUntil.Sub(ls.anchor.sent) / 3)
}

// confirmedSince reports whether Redis confirmed that the token held the
// lock by a change sent after t (handoff.go).
func (ls *lease) confirmedSince(t time.Time) bool { return ls.anchor.sent.After(t) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
