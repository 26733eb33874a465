package padlock

import (
	"sync/atomic"
	"time"
)

// lease is what a Locker knows of one lock's lease in Redis: when it surely
// runs until, and when to renew it. It belongs to the lock in Redis, not to
// a holder: a hand-off (wait_handoff.go) moves it on to the next holder with its
// schedule and its history. The watchdog owns it: every field is guarded by
// watchdog.mu.
//
// The lease in force in Redis is the one the last lease change that Redis
// applied set: the acquire, a renewal, an Extend or a ReleaseAfter, each
// "ttl from when it ran". Redis orders them: every change carries a number
// (seq, assigned here when it begins), and a change numbered below one
// Redis applied is refused (lua/grant.lua, lua/hold_extend.lua; on Redlock,
// on every node). What the client cannot always tell is whether a change
// whose reply was lost ran, or may still run later (a server stopped with
// the command unread in its socket runs it when it resumes). So:
//
//   - The anchor is the confirmed change with the highest number. Redis
//     applied it (or refused it for a later one), so the lease runs at
//     least until anchor.sent + its ttl, unless a later change shortened it.
//   - Every change numbered above the anchor, unanswered or lost, may have
//     run last: it sets an end after its send + its ttl (open).
//   - Every change numbered below the anchor is done with: it ran before
//     the anchor, or Redis refuses it if it runs now.
//
// So the trusted end is the earliest end the anchor or an open change
// could have set, less the drift margin: a shorter Extend shortens the
// trust the moment it is sent, and stops bounding it once a later change
// is confirmed. On Redlock a change is confirmed by a majority: every node
// of that majority has applied it or a later change, and refuses anything
// older, so the majority holds at least the trusted lease.
type lease struct {
	id     *lockID
	holder *Lock // the Lock that holds the lease now
	renew  bool  // the watchdog extends it while held (not Options.NoRenew)
	// inFlight belongs to the watchdog's schedule below, but sits beside
	// renew so that the two share one word: a Lock embeds its lease, and
	// is allocated once per lock cycle (see TestLockSizeClass).
	inFlight bool // a renewal is on its way
	stopped  bool // let go for good (watchdog.stop): no change begins on it any more
	ttl      time.Duration
	margin   func(ttl time.Duration) time.Duration

	anchor leaseChange
	open   []leaseChange // changes numbered above the anchor: they may have run after it
	seq    uint64        // numbers the changes begun so far

	validUntil time.Time // monotonic: the lease surely runs until then
	// ends is validUntil on the monotonic clock (since monoBase), for
	// readers that hold no lock: Lock.Err reports a lock lost the moment
	// its trust runs out, whether or not the watchdog has woken yet.
	ends atomic.Int64

	// The watchdog's schedule.
	renewAt  time.Time // when the next renewal is due
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
		if seq < ls.anchor.seq {
			ls.drop(seq) // refused if it runs: a later change ran
			return
		}
		ls.open[i].lost = true
		ls.trust()
		return
	}
	c := ls.open[i]
	c.answered = now
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
	if len(keep) == 0 {
		// Nothing open, as between renewals: a held lock keeps no
		// room for the next change (a million held locks kept 90 MB).
		ls.open = nil
	}
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
// lock by a change sent after t (wait_handoff.go).
func (ls *lease) confirmedSince(t time.Time) bool { return ls.anchor.sent.After(t) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
