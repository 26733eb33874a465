package padlock_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// The explorer checker's verdict: the invariants that need the whole run,
// checked once it ends (see explore_check_test.go for what the checker
// records as the run goes).

// finish runs the checks that need the whole run, and returns every
// violation.
func (c *checker) finish() []violation {
	c.checkHolds()
	c.checkSlotFences()
	c.checkTicks()
	c.checkLeaders()
	c.checkReleaseAfter()
	c.mu.Lock()
	defer c.mu.Unlock()
	sort.SliceStable(c.vs, func(i, j int) bool { return c.vs[i].at < c.vs[j].at })
	return c.vs
}

// effLast is the end of h's claims outside the restart window: a holder
// whose trust rests on a command sent before a restart without
// persistence (its acquire, or the round trip that confirmed a
// hand-off) is not counted from the restart on, or at all when its
// Acquire returned after the restart. One whose trust rests on a command
// sent after the restart is counted: Redis confirmed it then.
func (c *checker) effLast(h *hold) time.Duration {
	last := h.last
	for _, r := range c.restarts() {
		at := r.Sub(c.startedAt)
		if at >= h.anchor && at < last {
			last = max(at, h.start)
		}
	}
	return last
}

// inRestart reports whether a restart came between the command h's trust
// rests on and its return.
func (c *checker) inRestart(h *hold) bool { return c.restartIn(h.anchor, h.start) }

func (c *checker) checkHolds() {
	c.mu.Lock()
	holds := slices.Clone(c.holds)
	c.mu.Unlock()
	byKey := map[string][]*hold{}
	for _, h := range holds {
		byKey[h.key] = append(byKey[h.key], h)
	}
	for _, hs := range byKey {
		// Exclusion: at the moment each hold began, count the others
		// claimed across it.
		for _, h := range hs {
			if !h.alive || c.effLast(h) == h.start && c.inRestart(h) {
				continue
			}
			p := h.start
			var with []*hold
			permits := 1
			for _, o := range hs {
				if o == h || !o.alive || !(o.start <= p && p < c.effLast(o)) {
					continue
				}
				if h.kind == "permit" && o.kind == "permit" {
					permits++
					with = append(with, o)
				} else if h.conflicts(o) {
					with = append(with, o)
				}
			}
			over := false
			if h.kind == "permit" {
				over = permits > h.cap
			} else {
				over = len(with) > 0
			}
			if over && c.effLast(h) >= h.start {
				var names []string
				for _, o := range with {
					names = append(names, o.String())
				}
				c.fail(invExclusion, p, "%s began while held by: %s", h, strings.Join(names, "; "))
			}
		}
		// Hand-offs: a lock handed on (the same lock in Redis, under a
		// token of its own, a later holder) is confirmed by a command sent
		// after its release began.
		extended := map[any]bool{}
		for _, h := range hs {
			if h.run != nil {
				extended[h.run] = extended[h.run] || h.extended
			}
		}
		for _, a := range hs {
			for _, b := range hs {
				if a != b && a.run != nil && a.run == b.run && !extended[a.run] && a.releaseCalled >= 0 && b.start >= a.releaseCalled && b.alive && b.anchor < a.releaseCalled {
					c.fail(invHandOff, b.start, "%s was handed %s's lock, released at %.3fs, on the strength of a command sent at %.3fs", b.g, a, a.releaseCalled.Seconds(), b.anchor.Seconds())
				}
			}
		}
		// Fences: an exclusive grant returned later has a higher fence;
		// so does any grant asked for after another was released.
		for _, a := range hs {
			for _, b := range hs {
				if c.noFences || a == b || !a.alive || !b.alive || c.inRestart(a) || c.inRestart(b) || a.root == b.root {
					continue
				}
				// A resumed grant goes on with the grant it resumed.
				ra, rb := a.root, b.root
				ordered := a.exclusive() && b.exclusive() && (ra.start < rb.start || ra.start == rb.start && ra.id < rb.id)
				if c.wall != 0 {
					// On the wall clock a return is seen late: only a
					// grant seen returned before the other was asked for
					// surely came first.
					ordered = a.exclusive() && b.exclusive() && ra.start < rb.began
				}
				ordered = ordered || a.released >= 0 && a.released <= rb.began
				if ordered && a.fence >= b.fence && a.kind != "permit" && b.kind != "permit" {
					c.fail(invFenceOrder, b.start, "%s got fence %d, not above %d of earlier %s", b, b.fence, a.fence, a)
				}
			}
		}
	}
}

func (c *checker) checkLeaders() {
	c.mu.Lock()
	defer c.mu.Unlock()
	maxSeen := map[string]leaderSeen{}
	for _, s := range c.leaders {
		if s.none {
			// No leader reported while a term led across the whole call.
			for _, h := range c.holds {
				if h.kind == "term" && h.start < s.from && h.last > s.to && !c.restartIn(h.start, s.to) {
					c.vs = append(c.vs, violation{invLeaderGone, s.to, fmt.Sprintf("%s: Leader over %.3fs..%.3fs said no leader while %s led", s.g, s.from.Seconds(), s.to.Seconds(), h)})
				}
			}
			continue
		}
		if m, ok := maxSeen[s.g]; ok && s.ld.Fence < m.ld.Fence && m.to <= s.from {
			c.vs = append(c.vs, violation{invLeaderFence, s.to, fmt.Sprintf("%s: Leader at %.3fs reported %q fence %d after %q fence %d at %.3fs", s.g, s.to.Seconds(), s.ld.Value, s.ld.Fence, m.ld.Value, m.ld.Fence, m.to.Seconds())})
		}
		if m, ok := maxSeen[s.g]; !ok || s.ld.Fence > m.ld.Fence {
			maxSeen[s.g] = s
		}
		h := c.values[s.ld.Value]
		switch {
		case h == nil:
			c.vs = append(c.vs, violation{invLeaderStale, s.to, fmt.Sprintf("%s: Leader reported %q, which no term published", s.g, s.ld.Value)})
		case h.fence == -1:
			// A campaign that failed after its record was written: its
			// lock may still be held in Redis, by nobody.
		case s.to < h.start:
			// Read while the value's Campaign was still in flight: an
			// attempt of it whose reply was lost (a term nobody holds,
			// until its clean-up) may have written the record.
		case h.fence != s.ld.Fence:
			c.vs = append(c.vs, violation{invLeaderStale, s.to, fmt.Sprintf("%s: Leader at %.3fs reported %q with fence %d, but it is the value of %s", s.g, s.to.Seconds(), s.ld.Value, s.ld.Fence, h)})
		case h.resigned >= 0 && !h.resignFailed && h.resigned < s.from:
			c.vs = append(c.vs, violation{invLeaderStale, s.to, fmt.Sprintf("%s: Leader at %.3fs reported %q of %s, which resigned at %.3fs", s.g, s.to.Seconds(), s.ld.Value, h, h.resigned.Seconds())})
		}
	}
}

func (c *checker) checkReleaseAfter() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ra := range c.after {
		for _, o := range c.holds {
			// Excused: a restart without persistence since the release
			// (it dropped the key ReleaseAfter kept), or between the
			// command the other hold's trust rests on and its return
			// (it took the key before the restart: the named window).
			if o != ra.h && o.conflicts(ra.h) && o.start >= ra.from && o.start < ra.to && !c.restartIn(ra.from, o.start) && !c.inRestart(o) {
				c.vs = append(c.vs, violation{invReleaseAfter, o.start, fmt.Sprintf("%s released with ReleaseAfter(%v) at %.3fs; %s took the key at %.3fs", ra.h, ra.to-ra.from, ra.from.Seconds(), o, o.start.Seconds())})
			}
		}
	}
}

// checkTicks checks that no tick of the job ran twice, overlapping or
// not: a run's lock stays held until AtLeastFor after it was taken, so a
// later instance of the tick finds it held, and an Every that takes it
// AtLeastFor or more after the tick lets it go without running. Outside
// that promise: a Run that began AtLeastFor or more after its tick (its
// loop, not Run, knows the tick), and the named window (a restart without
// persistence between the first run's lock and the second's start).
func (c *checker) checkTicks() {
	c.mu.Lock()
	ticks := slices.Clone(c.ticks)
	c.mu.Unlock()
	byTick := map[time.Duration][]tickRun{}
	for _, t := range ticks {
		if !t.every && t.h.start-t.tick >= t.least {
			continue
		}
		byTick[t.tick] = append(byTick[t.tick], t)
	}
	for tick, ts := range byTick {
		sort.Slice(ts, func(i, j int) bool { return ts[i].h.start < ts[j].h.start })
		for i := 1; i < len(ts); i++ {
			a, b := ts[0], ts[i]
			if c.restartIn(a.h.anchor, b.h.start) {
				continue
			}
			c.fail(invTickOnce, b.h.start, "the tick at %.3fs ran twice: %s, then %s (AtLeastFor %v)", tick.Seconds(), a.h, b.h, b.least)
		}
	}
}
