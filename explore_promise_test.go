package padlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/padlockgo/padlock"
)

// The explorer's checks of promises beyond exclusion (see the table of
// invariants in RELIABILITY.md): fences across a hash slot, what a
// Release or a Resume that succeeded says about the grant it ended or
// took over, and a wait that ends when its context does.

// Invariant names, as failures and the summary report them.
const (
	invFenceSlot       = "fence-slot"       // a permit or read hold's fence not above every fence handed out before it in its slot
	invReleaseTruthful = "release-truthful" // Release returned nil for a grant whose lease had surely ended
	invResumeAfterEnd  = "resume-after-end" // Resume took over a grant that was released, taken over or had run out
)

// checkSlotFences checks that the fence of a permit or a read hold is
// strictly greater than the fence of every grant taken before it in its
// hash slot ("Its Fence is strictly greater than the fence of every
// permit, lock or hold taken before it in the key's hash slot": Semaphore,
// AcquireRead), even when TIME repeats its reading (explore.Plan.Align):
// two such grants never share a fence, and one asked for after another
// returned has a higher one.
func (c *checker) checkSlotFences() {
	if c.noFences {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	slotWide := func(h *hold) bool { return h.kind == "permit" || h.kind == "read" }
	for _, b := range c.holds {
		if !slotWide(b) || !b.alive || c.inRestart(b) {
			continue
		}
		for _, a := range c.holds {
			if a == b || !a.alive || a.root == b.root || c.inRestart(a) || c.slotOf(a.key) != c.slotOf(b.key) {
				continue
			}
			from, to := min(a.start, b.start), max(a.start, b.start)
			if c.restartIn(from-maxInFlight, to) {
				continue // the counter was lost in between: the named window
			}
			before := a.root.start < b.began
			switch {
			case a.fence == b.fence && (slotWide(a) || before):
				c.vs = append(c.vs, violation{inv: invFenceSlot, at: b.start, text: b.String() + " has the fence of " + a.String()})
			case before && a.fence > b.fence:
				c.vs = append(c.vs, violation{inv: invFenceSlot, at: b.start, text: b.String() + " has a fence below that of earlier " + a.String()})
			}
		}
	}
}

// slotOf names the fence counter a key's grants take their fences from:
// one for the whole deployment off Cluster.
func (c *checker) slotOf(key string) string {
	if c.slot == nil {
		return ""
	}
	return c.slot(key)
}

// releasedTruthfully checks a Release of h that returned nil when called
// at from: a fixed lease that nobody changed ends in Redis at most its
// lease after the grant's reply came back (its command ran before that),
// so a Release called later found the grant gone, whoever holds the key
// now, and must not say it released it.
func (c *checker) releasedTruthfully(h *hold, from time.Duration, lease time.Duration) {
	c.mu.Lock()
	fixed, extended := h.fixed, h.extended
	c.mu.Unlock()
	if !fixed || extended || h.root != h || h.multi != nil {
		return
	}
	if from > h.start+lease {
		c.fail(invReleaseTruthful, from, "%s: Release called at %.3fs, after its fixed lease of %v had run out in Redis (by %.3fs), returned nil",
			h, from.Seconds(), lease, (h.start + lease).Seconds())
	}
}

// resumed checks a Resume of the grant h detached (at h.released), which
// was called at began and took the lock over as rh: nobody else had taken
// it over before the call (a Resume of the same Ownership that returned,
// which changed its token), and its lease had not surely run out (its
// longest lease after the last renewal that may still have landed, with
// no pause of the server in between, which holds commands back).
func (w *world) resumed(h, rh *hold, began time.Duration) {
	c := w.chk
	c.mu.Lock()
	var before *hold
	for _, o := range c.holds {
		if o != rh && o.root == h.root && o.start > h.released && o.start < began {
			before = o
			break
		}
	}
	detached := h.released
	c.mu.Unlock()
	if before != nil {
		c.fail(invResumeAfterEnd, began, "%s resumed %s, which %s had taken over before", rh, h, before)
		return
	}
	ends := detached + maxInFlight + c.longestLease(h, 0)
	start := w.tr.Start()
	if began > ends && !w.pausedIn(start.Add(detached-maxInFlight), start.Add(began)) && !c.restartIn(detached-maxInFlight, began) {
		c.fail(invResumeAfterEnd, began, "%s resumed %s at %.3fs, though its lease ran out in Redis by %.3fs (detached at %.3fs)", rh, h, began.Seconds(), ends.Seconds(), detached.Seconds())
	}
}

// checkCancelled checks, as an operation of Locker li that failed with
// err ends after its context's deadline, that the deadline ended it: it
// returns within endSlack of the later of the deadline and its client's
// last reply (what it sent, a clean-up included, may still be answered),
// never at its next timer (a backoff, a re-check, a holder's lease end).
func (w *world) checkCancelled(li int, g, what string, ctx context.Context, err error) {
	dl, ok := ctx.Deadline()
	if err == nil || !ok || ctx.Err() == nil {
		return
	}
	w.checkEnded(li, g, what, dl, "its context's deadline", err)
}

// endSlack is how long after the later of its deadline and its client's
// last reply an operation may still return: a few round trips that its
// hooks do not see as replies (a connection that loses a reply below
// go-redis, a subscription's own connection), far below any timer it must
// not wait for (a recheck, a backoff, a holder's lease end). A semfair
// run under CI's load once returned 6 ms after its last reply, in a burst
// of resets and lost replies, with 1 ms allowed (seed 269, not seen again
// in 40 replays).
const endSlack = 20 * time.Millisecond

// checkBudget checks, as a waiting operation of Locker li (Options.Wait
// wait, called at began) that failed with err ends, that it waited no
// longer than its budget: it returns within endSlack of the later of
// the budget's end and its client's last reply.
func (w *world) checkBudget(li int, g, what string, began, wait time.Duration, err error) {
	if err == nil || wait <= 0 {
		return
	}
	w.checkEnded(li, g, what, w.tr.Start().Add(began+wait), "the end of its wait", err)
}

// checkEnded checks that an operation that failed with err ended within
// endSlack of the later of dl (named by what) and its client's last
// reply.
func (w *world) checkEnded(li int, g, what string, dl time.Time, which string, err error) {
	if w.chk.wall != 0 {
		return // on the wall clock a goroutine may be descheduled for longer
	}
	now := w.chk.now()
	from := dl.Sub(w.tr.Start())
	for _, h := range w.lhooks[li] {
		if d := h.LastDone(); !d.IsZero() {
			from = max(from, d.Sub(w.tr.Start()))
		}
	}
	if now-from > endSlack {
		w.chk.fail(invStuck, now, "%s: %s went on %v after %s at %.3fs and its client's last reply at %.3fs: %v",
			g, what, now-from, which, dl.Sub(w.tr.Start()).Seconds(), from.Seconds(), err)
	}
}

// ttl-truthful: "Once a lock's lease ran out, TTL ... return ErrNotHeld":
// TTL never reports a lease after another grant took the key (a restart
// without persistence lets one in while the holder still trusts its
// lease).
const invTTLTruthful = "ttl-truthful" // TTL reported a lease for a lock another grant had taken over

type ttlSeen struct {
	h            *hold
	called, said time.Duration
	d            time.Duration
}

// askTTL asks Redis for h's remaining lease, as a holder may between
// steps of its work.
func (w *world) askTTL(h *hold) {
	called := w.chk.now()
	d, err := h.lk.TTL(context.Background())
	w.tr.Add("%s TTL of %s#%d: %v, %v", h.g, h.kind, h.id, d, err)
	if err == nil {
		now := w.chk.now()
		w.order.mu.Lock()
		w.order.ttls = append(w.order.ttls, ttlSeen{h: h, called: called, said: now, d: d})
		w.order.mu.Unlock()
	}
}

// checkTTLs: a TTL that reported a lease was called before any later
// grant of the key returned (its token took the key: the holder's can
// never hold it again).
func (w *world) checkTTLs() {
	w.order.mu.Lock()
	ttls := slices.Clone(w.order.ttls)
	w.order.mu.Unlock()
	c := w.chk
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ttls {
		for _, o := range c.holds {
			if o.root == t.h.root || o.key != t.h.key || !o.conflicts(t.h) || o.fence <= t.h.fence || o.start >= t.called {
				continue
			}
			c.vs = append(c.vs, violation{invTTLTruthful, t.said, fmt.Sprintf("%s: TTL called at %.4fs reported %v left, but %s took the key before", t.h, t.called.Seconds(), t.d, o)})
			return
		}
	}
}

// progressFree is how long a key must stand free, as far as the run can
// know, for a waiter on it to take it: its next attempt comes within
// noticeRecheck (1s) of its last even when no notice wakes it, and the
// rest is slack. progressTrip bounds a round trip without a fault, with
// room to spare: a run's latency is at most 1ms each way, its commands in
// steps of at most coarseTick.
const (
	progressFree = 1200 * time.Millisecond
	progressTrip = 100 * time.Millisecond
	// faultBefore bounds how long before its caller heard of a fault the
	// command may have run: a slow reply comes up to the read timeout
	// after the command ran, and a stall delays the send.
	faultBefore = 3*time.Second + maxInFlight
)

// gaveUp records, for op (an Acquire with options o), whether it returned
// ErrNotAcquired with the key held throughout its wait: not unavailable,
// not ended by its context.
func (w *world) gaveUp(op *opSeen, ctx context.Context, err error, o padlock.Options) {
	busy := errors.Is(err, padlock.ErrNotAcquired) && !errors.Is(err, padlock.ErrUnavailable) && ctx.Err() == nil
	op.mu.Lock()
	op.busy, op.wait, op.ttl = busy, o.Wait, o.TTL
	op.mu.Unlock()
}

// checkProgress checks that waiting wins a free key ("Wait > 0 retries
// until the key is free or the wait runs out"; a release wakes the
// waiters, or grants the key to one): a mutex Acquire that met no fault
// and gave up, the key held, must not have waited through a stretch of
// progressFree during which nothing held the key. Nothing held it when no
// grant could have: none recorded (from its Acquire's call to its
// Release's nil, or, without that nil, to the end of its longest lease
// after its Release was called), none that an operation which met a
// fault may have left in Redis (a late copy of its attempt: a waiting
// Acquire's until a command's longest delay after it, which its buried
// token bounds; an Acquire without a wait's, up to its lease after it),
// none whose notice was lost may have left with a
// waiter that had gone (up to the longest lease after), and no pause or
// restart of a server. On one node and on the Cluster, in the mutex
// family, whose keys only its Acquires take.
func (w *world) checkProgress() {
	if w.fam != "mutex" || w.redlock {
		return
	}
	type span struct{ from, to time.Duration }
	busy := map[string][]span{} // by key: when a grant may have held it
	const forever = time.Duration(1 << 60)
	longest := 2 * w.ttl // the longest lease of a run: twice the longest TTL (an Extend as it lets go)
	for _, d := range []time.Duration{300 * time.Millisecond, 2 * time.Second} {
		longest = max(longest, 2*d)
	}
	o := w.order
	o.mu.Lock()
	ops := slices.Clone(o.ops)
	lost := slices.Clone(o.lost)
	o.mu.Unlock()
	// A grant an Acquire without a fault took was made no earlier than
	// a round trip before it returned, or, granted at a release, than
	// its notice (recovered by the waiter's timer when lost, which is
	// what a stretch of progressFree allows for); any other's, from its
	// call less a command's longest delay.
	from := map[*hold]time.Duration{}
	for _, op := range ops {
		op.mu.Lock()
		if op.hold != nil && !op.faulted {
			from[op.hold] = op.granted - progressTrip
		}
		op.mu.Unlock()
	}
	c := w.chk
	c.mu.Lock()
	holds := slices.Clone(c.holds)
	c.mu.Unlock()
	for _, h := range holds {
		c.mu.Lock()
		released, called := h.released, h.releaseCalled
		c.mu.Unlock()
		end := time.Duration(forever)
		switch {
		case released >= 0:
			end = released
		case called >= 0:
			end = called + maxInFlight + c.longestLease(h, 0)
		}
		begin, ok := from[h]
		if !ok {
			begin = h.began - maxInFlight
		}
		busy[h.key] = append(busy[h.key], span{begin, end})
	}
	// Lost grant notices, any key: the grant they announced ends within
	// the claim window, and the waiter it was for looks again within a
	// recheck (wait_claim.go), not a lease later.
	var everywhere []span
	for _, at := range lost {
		everywhere = append(everywhere, span{at - maxInFlight, at + maxInFlight + padlock.ClaimWindow + time.Second})
	}
	type waited struct {
		op       *opSeen
		key      string
		from, to time.Duration
	}
	var check []waited
	for _, op := range ops {
		op.mu.Lock()
		faulted, key, began, ended, isBusy, kind, ttl, wait, li := op.faulted, op.key, op.began, op.ended, op.busy, op.kind, op.ttl, op.wait, op.li
		faultsAt := slices.Clone(op.faultsAt)
		op.mu.Unlock()
		// A Locker killed (a fleet run) cleans nothing up: what it
		// sent before may still run after, for a lease.
		killed := li == w.doomed && w.killedAt() >= 0 && ended >= w.killedAt()-maxInFlight
		switch {
		case ended < 0:
			busy[key] = append(busy[key], span{began - maxInFlight, forever})
		case faulted && kind == "mutex" && wait > 0 && !killed:
			// A waiting Acquire cleans up after an attempt whose reply
			// was lost before it sends the next, and the clean-up
			// buries the attempt (lua/claim.lua): a copy of it that
			// runs late holds the key until that clean-up runs, or
			// takes nothing, never a lease. So each fault may keep the
			// key from its command's send (a slow reply comes up to a
			// read timeout after it) until its clean-up, sent at once,
			// has surely run; and the waiter itself, once its faults
			// are over, must win a free key as any waiter does.
			for _, f := range faultsAt {
				busy[key] = append(busy[key], span{f - faultBefore, f + maxInFlight + time.Second})
			}
			if isBusy && ended-began >= progressFree {
				check = append(check, waited{op, key, began, ended})
			}
		case faulted:
			busy[key] = append(busy[key], span{began - maxInFlight, ended + maxInFlight + max(ttl, w.ttl)})
		case isBusy && kind == "mutex" && ended-began >= progressFree:
			check = append(check, waited{op, key, began, ended})
		}
	}
	// The AcquireAlls of a killed Locker that were on their way at the
	// kill: one whose attempt's reply was lost may have a copy that runs
	// late and takes its keys, and its rollback, which would bury it,
	// was never sent (a dead holder's lease).
	if w.doomed >= 0 && w.killedAt() >= 0 {
		o.mu.Lock()
		sets := slices.Clone(o.setsWaited[w.doomed])
		o.mu.Unlock()
		for _, s := range sets {
			if s[1] >= w.killedAt()-maxInFlight {
				for _, k := range w.keys {
					busy[k] = append(busy[k], span{s[0] - maxInFlight, s[1] + maxInFlight + max(longest, 2*w.fleetTTL)})
				}
			}
		}
	}
	start := w.tr.Start()
	for _, wt := range check {
		spans := append(slices.Clone(busy[wt.key]), everywhere...)
		slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
		// Walk the free stretches of [from, to].
		at, i := wt.from, 0
		for at < wt.to {
			for i < len(spans) && spans[i].from <= at {
				at = max(at, spans[i].to)
				i++
			}
			if at >= wt.to {
				break
			}
			next := wt.to
			if i < len(spans) {
				next = min(next, spans[i].from)
			}
			if next-at >= progressFree && !w.pausedIn(start.Add(at-maxInFlight), start.Add(next)) && !c.restartIn(at-maxInFlight, next) {
				c.fail(invProgress, wt.to, "L%d's Acquire of %s (wait %v, %.3fs to %.3fs) gave up, though nothing held the key from %.3fs to %.3fs",
					wt.op.li, wt.key, wt.op.wait, wt.from.Seconds(), wt.to.Seconds(), at.Seconds(), next.Seconds())
				break
			}
			at = next
		}
	}
}

// resumer resumes own, which h's holder detached, on Locker li after
// wait, then holds it and lets it go as any holder does.
func (w *world) resumer(actor, li int, own padlock.Ownership, h *hold, wait time.Duration) {
	r := w.rng(actor)
	g := fmt.Sprintf("r%d@L%d", actor, li)
	time.Sleep(wait)
	if w.isClosed(li) || !time.Now().Before(w.end) {
		return
	}
	o := padlock.Options{TTL: pick(r, w.ttl, w.ttl, 300*time.Millisecond, 2*time.Second), NoRenew: r.IntN(8) == 0}
	ctx, cancel := opCtx(r)
	began := w.chk.now()
	lk, err := w.lockers[li].Resume(ctx, own, o)
	w.checkCancelled(li, g, "Resume of "+h.String(), ctx, err)
	cancel()
	w.checkClosed(li, g, "Resume of "+h.String())
	w.tr.Add("%s resumed %s: %v", g, h, err)
	w.refused(g, err)
	if err != nil {
		return
	}
	rh := w.chk.grant(g, "mutex", h.key, lk.Fence(), lk, nil, 1, began, h)
	w.chk.asked(rh, o.TTL)
	w.resumed(h, rh, began)
	w.work(r, rh, o.TTL, li)
	w.letGo(r, rh, li, o)
}
