package padlock_test

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/explore"
)

// The explorer's checker: what every holder, observer and releaser saw,
// and the invariants it must keep (see "The explorer" in RELIABILITY.md).
// Times are virtual, measured from the start of the run.

// Invariant names, as failures and the summary report them.
const (
	invExclusion      = "exclusion"           // more holders at once than the primitive admits
	invFenceOrder     = "fence-order"         // a later grant with a fence not above an earlier one's
	invFencedStore    = "fenced-store"        // a holder whose writes a fenced store refuses, or two with one fence
	invLeaderFence    = "leader-fence"        // Leader reported a lower fence than it had before
	invLeaderStale    = "leader-stale"        // Leader reported a resigned term, or a value with another term's fence
	invLeaderGone     = "leader-gone"         // Leader reported no leader while a term led throughout the call
	invReleaseAfter   = "release-after"       // another holder took the key before ReleaseAfter's d had passed
	invRenewedLost    = "renewed-after-lost"  // a lock Err reported lost was renewed afterwards
	invKeyLeak        = "key-leak"            // a key without expiry left behind
	invStuck          = "stuck"               // an Acquire went on waiting after its Locker was closed
	invDeadGrant      = "dead-grant"          // Acquire returned a lock whose Err was not nil at once
	invHandOff        = "handoff-unconfirmed" // a lock handed on without a command sent after the release began
	invErrLate        = "err-late"            // Err said nil after the trust (ValidUntil) had run out
	invLeaseForeign   = "lease-foreign"       // a holder's lease changed to one it never asked for
	invReleasedHandle = "released-handle"     // Extend of a handle already let go returned nil
	invReleaseNotHeld = "release-not-held"    // Release of a held lock said the lock was gone
	invQueuedTwice    = "queued-twice"        // a fair queue held one waiter's place twice
	invTickOnce       = "tick-once"           // a scheduled job ran twice for one tick
	invMajorityLease  = "majority-lease"      // a Redlock holder trusted a lease fewer than a majority of nodes held
)

// hold is one grant as its holder saw it.
type hold struct {
	id    int
	g     string // the goroutine that holds it
	kind  string // mutex, write, read, permit, term
	key   string
	fence int64
	lk    *padlock.Lock
	term  *padlock.Term
	multi *padlock.MultiLock // one of the keys of a set taken with AcquireAll
	cap   int                // how many holds of this kind the key admits at once

	began    time.Duration // Acquire called
	anchor   time.Duration // when the command its trust rests on was sent, as Acquire returned
	start    time.Duration // Acquire returned
	last     time.Duration // last moment its holder saw Err()==nil, before ValidUntil
	released time.Duration // Release returned nil; -1 if not
	resigned time.Duration // Resign returned nil; -1 if not
	// resignFailed: a Resign of the term returned an error, so another
	// one's nil (a second Resign returns nil) confirms nothing.
	resignFailed bool
	// alive: its holder's first check, as Acquire returned, found it
	// held. A grant that comes back already lost (a Campaign whose
	// record took longer than the lease) is nobody's: nothing is done
	// under it.
	alive         bool
	run           any           // the lock in Redis it holds, which a hand-off passes on (padlock.LockRun)
	releaseCalled time.Duration // Release or ReleaseAfter called; -1 if not
	// releaseFailed: Release returned an error; -1 if not. One that Redis
	// did not answer goes on behind it (lock.go letGo).
	releaseFailed time.Duration
	extended      bool // Extend was called: a shorter change in flight lowers ValidUntil, and the anchor read from it
	// root is the grant a Resume took over (through any number of
	// Detach and Resume), itself if none: the same fence, the same grant
	// to a fenced store.
	root *hold
	// leases are those its holder asked for: Options.TTL, Resume's, and
	// every Extend's. Its Lease is one of them.
	leases []time.Duration
	fixed  bool // a fixed lease (Options.NoRenew): its trust runs out while held
	// ended is when its holder first saw it ended (-1: never), and
	// endErr what Err said then.
	ended  time.Duration
	endErr error
}

// validUntil is the end of h's trust (zero for a term).
func (h *hold) validUntil() time.Time {
	switch {
	case h.multi != nil:
		return h.multi.ValidUntil()
	case h.lk != nil:
		return h.lk.ValidUntil()
	}
	return time.Time{}
}

func (h *hold) String() string {
	return fmt.Sprintf("%s %s#%d of %s (fence %d, held %.3fs..%.3fs)", h.g, h.kind, h.id, h.key, h.fence, h.start.Seconds(), h.last.Seconds())
}

func (h *hold) exclusive() bool { return h.kind == "mutex" || h.kind == "write" || h.kind == "term" }

// conflicts reports whether h and o may not be held at once.
func (h *hold) conflicts(o *hold) bool {
	if h.key != o.key {
		return false
	}
	switch {
	case h.kind == "read" && o.kind == "read":
		return false
	case h.kind == "permit" && o.kind == "permit":
		return false // counted against the permits instead
	}
	return true
}

type violation struct {
	inv  string
	at   time.Duration
	text string
}

type leaderSeen struct {
	g        string
	from, to time.Duration
	ld       padlock.Leader
	none     bool // ErrNoLeader
}

type releaseAfter struct {
	h        *hold
	from, to time.Duration // the key stays locked over [from, from+d)
}

type checker struct {
	tr *explore.Trace

	mu    sync.Mutex
	holds []*hold
	vs    []violation
	reg   map[string]struct {
		fence int64
		by    *hold
	} // a fenced store per key
	values    map[string]*hold // a leader's published values, by value
	leaders   []leaderSeen
	after     []releaseAfter
	restarts  func() []time.Time
	startedAt time.Time
	margin    func(ttl time.Duration) time.Duration // the Lockers' drift margin
	// wall, when not zero, says the run is on the wall clock, where a
	// goroutine may be descheduled between any two steps: grants are
	// ordered by one's return before the other's call (see checkHolds),
	// and a grant is dead only if its trust ran out more than wall
	// before its holder saw Acquire return, or ran out before it while
	// stalled (when set) says the process's timers kept time.
	wall     time.Duration
	stalled  func(from, to time.Duration) bool
	noFences bool // Redlock: every Fence is 0
	// backing, on Redlock, says why the nodes do not back a holder that
	// sees its lock held ("" when a majority does).
	backing func(h *hold) string
	ticks   []tickRun
	// slot names the fence counter of a key (nil: one for all keys).
	slot func(key string) string
}

// tickRun is one call of a scheduled job's fn.
type tickRun struct {
	h    *hold
	tick time.Duration // the tick it ran for
	// every: under schedule.Every, which lets a lock taken too late for
	// the tick go without running fn; else under schedule.Run, called by
	// a loop of the explorer's own, whose promise holds for a run that
	// began within AtLeastFor of its tick.
	every bool
	least time.Duration // AtLeastFor
}

func newChecker(tr *explore.Trace, restarts func() []time.Time, margin func(time.Duration) time.Duration) *checker {
	return &checker{margin: margin, tr: tr, reg: map[string]struct {
		fence int64
		by    *hold
	}{}, values: map[string]*hold{}, restarts: restarts, startedAt: tr.Start()}
}

func (c *checker) now() time.Duration { return c.tr.Since() }

func (c *checker) fail(inv string, at time.Duration, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.vs = append(c.vs, violation{inv: inv, at: at, text: fmt.Sprintf(format, args...)})
	c.tr.Add("VIOLATION %s: %s", inv, fmt.Sprintf(format, args...))
}

// restartIn reports whether a server restarted without persistence
// within (from, to]: the named window in which holders of the keys it
// dropped still believe they hold them.
func (c *checker) restartIn(from, to time.Duration) bool {
	for _, r := range c.restarts() {
		at := r.Sub(c.startedAt)
		if at > from && at <= to {
			return true
		}
	}
	return false
}

// grant records a grant whose Acquire was called at began and returned
// now, and claims it once.
func (c *checker) grant(g, kind, key string, fence int64, lk *padlock.Lock, term *padlock.Term, capacity int, began time.Duration, of *hold) *hold {
	now := c.now()
	var trust time.Time
	if lk != nil {
		trust = padlock.TrustedUntil(lk)
	}
	anchor := began
	if lk != nil {
		// ValidUntil is the anchor's send plus the lease less the margin.
		if v := lk.ValidUntil(); !v.IsZero() {
			ttl := lk.Lease()
			anchor = v.Add(-(ttl - c.margin(ttl))).Sub(c.startedAt)
		}
	}
	c.mu.Lock()
	h := &hold{id: len(c.holds) + 1, g: g, kind: kind, key: key, fence: fence, lk: lk, term: term, cap: capacity,
		began: began, anchor: anchor, start: now, last: now, released: -1, resigned: -1, releaseCalled: -1, releaseFailed: -1, ended: -1}
	h.root = h
	if of != nil {
		h.root = of.root
	}
	if lk != nil {
		h.run = padlock.LockRun(lk)
	}
	c.holds = append(c.holds, h)
	c.mu.Unlock()
	c.tr.Add("%s granted %s", g, h)
	alive := c.claim(h)
	c.mu.Lock()
	h.alive = alive
	c.mu.Unlock()
	if !alive && term == nil && c.deadAt(trust, now) {
		c.fail(invDeadGrant, now, "%s: Acquire returned it with Err %v", h, lk.Err())
	}
	return h
}

// grantMulti records the grant of key as one of a MultiLock's, and
// claims it once.
func (c *checker) grantMulti(g, key string, fence int64, m *padlock.MultiLock, began time.Duration) *hold {
	now := c.now()
	trust := padlock.SetTrustedUntil(m)
	c.mu.Lock()
	h := &hold{id: len(c.holds) + 1, g: g, kind: "mutex", key: key, fence: fence, multi: m, cap: 1,
		began: began, anchor: began, start: now, last: now, released: -1, resigned: -1, releaseCalled: -1, releaseFailed: -1, ended: -1}
	h.root = h
	c.holds = append(c.holds, h)
	c.mu.Unlock()
	c.tr.Add("%s granted %s (AcquireAll)", g, h)
	alive := c.claim(h)
	c.mu.Lock()
	h.alive = alive
	c.mu.Unlock()
	if !alive && c.deadAt(trust, now) {
		c.fail(invDeadGrant, now, "%s: AcquireAll returned it with Err %v", h, m.Err())
	}
	return h
}

// deadAt reports whether a grant trusted until trust (as the watchdog
// last set it), whose Acquire was seen to return at now, and found ended
// by its holder's first check, was dead when it was returned: on virtual
// time, always; on the wall clock, when its trust had run out more than
// c.wall before now, or before now with no stall of the process's
// timers from then on (the holder may have been descheduled between
// the return and now).
func (c *checker) deadAt(trust time.Time, now time.Duration) bool {
	if c.wall == 0 {
		return true
	}
	end := trust.Sub(c.startedAt)
	return end < now-c.wall || end < now && c.stalled != nil && !c.stalled(end, now)
}

// claim is the holder's check before a step of its work: it holds while
// Err() is nil and ValidUntil has not passed. It writes its fence to the
// key's fenced store, as the work would. The moment it claims is read
// before the check: on the wall clock (explore_cluster_test.go) a holder
// may be descheduled between any two steps, and a claim must never say
// it held later than Err said so.
func (c *checker) claim(h *hold) bool {
	var err error
	at := time.Now()
	v1 := h.validUntil()
	if h.term != nil {
		err = h.term.Err()
	} else if h.multi != nil {
		err = h.multi.Err()
	} else {
		err = h.lk.Err()
	}
	v2 := h.validUntil()
	valid := true
	if h.term == nil {
		// Err reports a lock lost the moment its trust runs out: read
		// ValidUntil on both sides of it, so that a renewal confirmed
		// in between does not count.
		valid = at.Before(v2)
		if err == nil && !at.Before(v1) && !valid {
			c.fail(invErrLate, c.now(), "%s: Err nil %v after its trust ran out at %.3fs", h, at.Sub(v2), v2.Sub(c.startedAt).Seconds())
		}
	}
	if h.lk != nil {
		if ls := h.lk.Lease(); err == nil && len(h.asked()) > 0 && !slices.Contains(h.asked(), ls) {
			c.fail(invLeaseForeign, c.now(), "%s: its lease is %v; its holder asked for %v", h, ls, h.asked())
		}
	}
	now := at.Sub(c.startedAt)
	if err != nil || !valid {
		c.tr.Add("%s sees %s#%d ended: %v", h.g, h.kind, h.id, err)
		c.mu.Lock()
		if h.ended < 0 {
			h.ended, h.endErr = now, err
		}
		c.mu.Unlock()
		return false
	}
	if c.backing != nil {
		if why := c.backing(h); why != "" {
			c.fail(invMajorityLease, now, "%s: %s", h, why)
		}
	}
	c.mu.Lock()
	h.last = now
	var stale string
	if h.exclusive() && !c.noFences {
		r := c.reg[h.key]
		switch {
		case h.fence > r.fence:
			c.reg[h.key] = struct {
				fence int64
				by    *hold
			}{h.fence, h}
		case h.fence == r.fence && r.by != nil && r.by.root == h.root:
		case !c.restartInLocked(h.anchor, now):
			stale = fmt.Sprintf("%s wrote fence %d while the store had %d from %s", h, h.fence, r.fence, r.by)
		}
	}
	c.mu.Unlock()
	if stale != "" {
		c.fail(invFencedStore, now, "%s", stale)
	}
	return true
}

func (c *checker) restartInLocked(from, to time.Duration) bool { return c.restartIn(from, to) }

func (c *checker) extending(h *hold, ds ...time.Duration) {
	c.mu.Lock()
	h.extended = true
	h.leases = append(h.leases, ds...)
	c.mu.Unlock()
}

// fixedLease records that h's lease is fixed (Options.NoRenew).
func (c *checker) fixedLease(h *hold) {
	c.mu.Lock()
	h.fixed = true
	c.mu.Unlock()
}

// longestLease returns the longest lease h's holder asked for, when it
// took it or in an Extend since, and at least ttl.
func (c *checker) longestLease(h *hold, ttl time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	longest := ttl
	for _, d := range h.leases {
		longest = max(longest, d)
	}
	return longest
}

// asked records the lease h's holder asked for when it took it.
func (c *checker) asked(h *hold, ttl time.Duration) {
	c.mu.Lock()
	h.leases = append(h.leases, ttl)
	c.mu.Unlock()
}

func (h *hold) asked() []time.Duration {
	return h.leases
}

func (c *checker) releasing(h *hold) {
	now := c.now()
	c.mu.Lock()
	h.releaseCalled = now
	c.mu.Unlock()
}

func (c *checker) released(h *hold) {
	now := c.now()
	c.mu.Lock()
	h.released = now
	c.mu.Unlock()
}

// releaseFailedAt records that h's Release returned an error.
func (c *checker) releaseFailedAt(h *hold) {
	now := c.now()
	c.mu.Lock()
	h.releaseFailed = now
	c.mu.Unlock()
}

func (c *checker) releasedAfter(h *hold, from time.Duration, d time.Duration) {
	c.mu.Lock()
	c.after = append(c.after, releaseAfter{h: h, from: from, to: from + d})
	c.mu.Unlock()
}

func (c *checker) resigned(h *hold, err error) {
	now := c.now()
	c.mu.Lock()
	if err == nil {
		h.resigned = now
	} else {
		h.resignFailed = true
	}
	c.mu.Unlock()
}

// publish records that value is the term h's (before it is sent).
func (c *checker) publish(value string, h *hold) {
	c.mu.Lock()
	c.values[value] = h
	c.mu.Unlock()
}

func (c *checker) leader(s leaderSeen) {
	c.mu.Lock()
	c.leaders = append(c.leaders, s)
	c.mu.Unlock()
}

// ranTick records that h's holder, a scheduled job's fn, runs for tick.
func (c *checker) ranTick(h *hold, tick time.Time, every bool, least time.Duration) {
	c.mu.Lock()
	c.ticks = append(c.ticks, tickRun{h: h, tick: tick.Sub(c.startedAt), every: every, least: least})
	c.mu.Unlock()
}
