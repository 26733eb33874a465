package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
)

// The explorer's actors on locks: each takes a grant of its primitive,
// works under it, watches for its loss and lets it go, while faults and
// closed Lockers cut in (see explore_test.go for the run around them).

func (w *world) isClosed(li int) bool {
	select {
	case <-w.closed[li]:
		return true
	default:
		return false
	}
}

// opCtx returns the context of one operation: usually without deadline;
// sometimes one that ends mid-operation.
func opCtx(r *rand.Rand) (context.Context, context.CancelFunc) {
	if r.IntN(5) == 0 {
		return context.WithTimeout(context.Background(), time.Duration(1+r.IntN(300))*time.Millisecond)
	}
	return context.WithCancel(context.Background())
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// locker is one goroutine taking, holding and letting go of grants of
// the run's family on Locker li.
// semPermits is the capacity of the sem families' semaphores.
const semPermits = 2

// impatientBeat is the beat the impatient Locker's waiters that gave up
// come back on, the next one (a fleet run's; explore_idle_test.go); on
// one beat in two (burstAt) all that come back wait only impatientBurst,
// and then come back on the next impatientRest.
const (
	impatientBeat  = 300 * time.Millisecond
	impatientRest  = 3 * time.Second
	impatientBurst = 5 * time.Millisecond
)

// burstAt reports whether the impatient Locker's waiters that come back
// on the beat at t all give up impatientBurst later: drawn from the seed
// and t alone, so that every one of them draws the same.
func (w *world) burstAt(t time.Time) bool {
	return rand.New(rand.NewPCG(w.seed^0xb0257, uint64(t.UnixNano()))).IntN(2) == 0
}

func (w *world) locker(actor, li int) {
	r := w.rng(actor)
	g := fmt.Sprintf("g%d@L%d", actor, li)
	l := w.lockers[li]
	var sem *padlock.Semaphore
	permits := semPermits
	if w.fam == "sem" || w.fam == "semfair" {
		sem, _ = l.Semaphore(permits)
	}
	sets := w.rng(-600000 - actor)     // drawn apart: AcquireAlls in fleet runs
	patience := w.rng(-700000 - actor) // drawn apart: an impatient Locker's waits
	var beat time.Time                 // the impatient beat this goroutine came back on
	for time.Now().Before(w.end) && !w.isClosed(li) && !w.killedNow(li) && !w.quit(li) {
		key := pick(r, w.keys...)
		o := padlock.Options{
			TTL:  pick(r, w.ttl, w.ttl, w.ttl, 300*time.Millisecond, 2*time.Second),
			Wait: pick(r, 0, 100*time.Millisecond, time.Second, 3*time.Second, 3*time.Second, 8*time.Second),
			Fair: w.fam == "fair" || w.fam == "semfair",
			// A fixed lease now and then (most of the extend family's):
			// nothing renews it, so the trust runs out while it is held.
			NoRenew: r.IntN(8) == 0 || w.fam == "extend" && r.IntN(3) != 0,
		}
		if w.hot || w.fleet {
			// Waiters that may be handed the lock: the same lease, a wait.
			o.TTL, o.Wait = w.ttl, max(o.Wait, time.Second)
		}
		if w.fleet {
			// Leases long beside the claim window, as users' are: a grant
			// to a waiter that is not there that held the key for one
			// would break the idle invariant.
			o.NoRenew, o.TTL = false, w.fleetTTL
			if li == w.impatient {
				o.Wait = time.Duration(100+patience.IntN(500)) * time.Millisecond
				if !beat.IsZero() && w.burstAt(beat) {
					// Every waiter back on this beat gives up at once,
					// a round trip or two after it joined the line.
					o.Wait = impatientBurst
				}
				beat = time.Time{}
			}
			if li == w.doomed {
				// The doomed Locker's waiters wait long: one killed in a
				// fair queue stays there, dead, for most of its wait
				// unless its entry leaves once its bid is bidLife old.
				o.Wait = 8 * time.Second
			}
		}
		if w.maxWait != 0 {
			o.Wait = min(o.Wait, w.maxWait)
		}
		if w.fam == "multi" && r.IntN(3) != 0 || w.fam == "cluster" && r.IntN(2) == 0 {
			w.multi(r, g, li, o, w.keys)
			continue
		}
		if w.fleetSets && sets.IntN(5) == 0 {
			// An AcquireAll among the fleet's waiters: it waits for the
			// busy key as they do, bids, and takes its turn (the idle and
			// claimed invariants; its other key is its own).
			w.multi(r, g, li, o, []string{w.keys[0], "k1"})
			continue
		}
		kind, capacity := "mutex", 1
		ctx, cancel := opCtx(r)
		ctx, op := withOp(ctx)
		unwait := w.waitsOn(li, op, cancel)
		began := w.chk.now()
		var (
			lk  *padlock.Lock
			err error
		)
		switch w.fam {
		case "rw":
			if r.IntN(2) == 0 {
				kind = "write"
				w.began(op, li, kind, key, o)
				lk, err = l.AcquireWrite(ctx, key, o)
			} else {
				kind = "read"
				w.began(op, li, kind, key, o)
				lk, err = l.AcquireRead(ctx, key, o)
			}
		case "sem", "semfair":
			kind, capacity = "permit", permits
			w.began(op, li, kind, key, o)
			lk, err = sem.Acquire(ctx, key, o)
		default:
			w.began(op, li, kind, key, o)
			lk, err = l.Acquire(ctx, key, o)
		}
		unwait()
		w.ended(op, err == nil)
		w.gaveUp(op, ctx, err, o)
		w.checkCancelled(li, g, kind+" "+key, ctx, err)
		w.checkBudget(li, g, kind+" "+key, began, o.Wait, err)
		cancel()
		w.checkClosed(li, g, kind+" "+key)
		w.refused(g, err)
		if err != nil && o.Fair || err != nil && kind == "write" {
			w.leftQueue(g, kind+" "+key, op, began)
		}
		if err != nil {
			w.tr.Add("%s %s %s (TTL %v, wait %v): %v", g, kind, key, o.TTL, o.Wait, err)
			away := 50
			if w.fleet {
				// A waiter that gave up is gone a while: what it left in
				// Redis is nobody's (the claimed invariant).
				away = 1000
			}
			if li == w.impatient {
				// The impatient Locker's waiters come back on a beat of
				// the run's clock, so two of them often call Acquire at
				// one instant: both try Redis and bid, the second passes
				// its bid to the line, and all may give up before the
				// first takes it over; the last to leave withdraws it
				// (the claimed invariant).
				// The next beat, the same for every waiter that gave
				// up since the last; after a burst, past bidLife: the
				// bid the last of them left, or dropped, is then the
				// Locker's last, for a release to grant.
				every := impatientBeat
				if o.Wait == impatientBurst {
					every = impatientRest
				}
				beat = time.Now().Truncate(every).Add(every)
				time.Sleep(time.Until(beat))
				continue
			}
			time.Sleep(time.Duration(r.IntN(away)) * time.Millisecond)
			continue
		}
		h := w.chk.grant(g, kind, key, lk.Fence(), lk, nil, capacity, began, nil)
		op.mu.Lock()
		op.hold = h
		op.mu.Unlock()
		w.chk.asked(h, o.TTL)
		if o.NoRenew {
			w.chk.fixedLease(h)
		}
		w.work(r, h, o.TTL, li)
		w.letGo(r, h, li, o)
	}
}

// multi takes a set of keys with AcquireAll (every key of it held at
// once, each with its own fence), holds it for a while, checking it
// before each small step, sometimes extends it, and releases it.
func (w *world) multi(r *rand.Rand, g string, li int, o padlock.Options, of []string) {
	keys := slices.Clone(of)
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	n := len(keys)
	if w.maxSet != 0 {
		n = min(n, w.maxSet)
	}
	keys = keys[:1+r.IntN(n)]
	o.Fair, o.NoRenew = false, false
	if br := w.rng(-800 - int(w.actors.Add(1))); br.IntN(4) == 0 {
		// A long backoff after an attempt that got no answer: Close and
		// the context must still end the wait at once.
		o.Retry = padlock.LinearBackoff(pick(br, 500*time.Millisecond, 2*time.Second))
	}
	l := w.lockers[li]
	ctx, cancel := opCtx(r)
	ctx, op := withOp(ctx)
	began := w.chk.now()
	if w.fleet {
		defer w.setWaited(li, began) // its wait, hold and release
	}
	m, err := l.AcquireAll(ctx, keys, o)
	w.checkCancelled(li, g, fmt.Sprintf("AcquireAll %v", keys), ctx, err)
	w.checkBudget(li, g, fmt.Sprintf("AcquireAll %v", keys), began, o.Wait, err)
	cancel()
	w.checkClosed(li, g, fmt.Sprintf("AcquireAll %v", keys))
	w.refused(g, err)
	if err == nil {
		w.setGranted(m)
		if w.fleet && slices.Contains(keys, w.keys[0]) {
			w.setTook(li)
		}
	} else {
		w.setFailed(li, g, keys, op, began)
	}
	if err != nil {
		w.tr.Add("%s AcquireAll %v (TTL %v, wait %v): %v", g, keys, o.TTL, o.Wait, err)
		time.Sleep(time.Duration(r.IntN(50)) * time.Millisecond)
		return
	}
	var hs []*hold
	for _, k := range m.Keys() {
		h := w.chk.grantMulti(g, k, m.Fence(k), m, began)
		w.chk.asked(h, o.TTL)
		hs = append(hs, h)
	}
	claim := func() bool {
		for _, h := range hs {
			if !w.chk.claim(h) {
				return false
			}
		}
		return true
	}
	for left := time.Duration(1+r.IntN(2*int(o.TTL/time.Millisecond))) * time.Millisecond; left > 0; {
		step := min(left, 10*time.Millisecond)
		time.Sleep(step)
		left -= step
		if !claim() {
			break
		}
		if w.extendNow(r) {
			d := pick(r, o.TTL/2, o.TTL, 2*o.TTL)
			for _, h := range hs {
				w.chk.extending(h, d)
			}
			ctx, cancel := opCtx(r)
			err := m.Extend(ctx, d)
			cancel()
			w.tr.Add("%s extended %v to %v: %v", g, keys, d, err)
		}
	}
	for _, h := range hs {
		w.chk.releasing(h)
	}
	ctx, cancel = opCtx(r)
	err = m.Release(ctx)
	cancel()
	w.tr.Add("%s released %v: %v", g, keys, err)
	for _, h := range hs {
		if err == nil {
			w.chk.released(h)
		} else {
			w.chk.releaseFailedAt(h)
		}
	}
}

// checkClosed checks, as an operation of Locker li ends, that it did not
// go on after the Locker was closed: once Close returned, an operation
// may still wait for the replies of commands it sent (the fault layer
// says when the client's last command returned), then ends at once.
func (w *world) checkClosed(li int, g, what string) {
	c := time.Duration(w.closedAt[li].Load())
	if c == 0 {
		return
	}
	now := w.chk.now()
	from := c
	for _, h := range w.lhooks[li] {
		if d := h.LastDone(); !d.IsZero() {
			from = max(from, d.Sub(w.tr.Start()))
		}
	}
	if now-from > closeSlack {
		w.chk.fail(invStuck, now, "%s: %s went on %v after its Locker was closed at %.3fs and its client's last reply at %.3fs", g, what, now-from, c.Seconds(), from.Seconds())
	}
}

// coarseTick is the step in which commands reach the server in a run
// whose TIME repeats (explore.Plan.Align).
const coarseTick = time.Millisecond

// closeSlack is how long an operation of a closed Locker may go on after
// the later of Close's return and its client's last reply: on the
// bubble's clock nothing else takes time.
const closeSlack = time.Millisecond

// work holds h for a while, checking it before each small step of its
// work (every 10ms at most); a lock found lost is watched for renewals
// that must not come.
func (w *world) work(r *rand.Rand, h *hold, ttl time.Duration, li int) {
	edge := r.IntN(2) == 0
	scale := ttl
	if w.fleet {
		scale = w.ttl // holds as long as other runs', under longer leases
	}
	left := time.Duration(1+r.IntN(2*int(scale/time.Millisecond))) * time.Millisecond
	if w.hot {
		left = time.Duration(pick(r, 1, 2, 4)) * time.Millisecond
	}
	// TTL now and then (drawn apart, so that the other runs keep their
	// randomness): Redis answers for the holder's token alone.
	probe := w.rng(-100000 - h.id)
	for left > 0 {
		if h.kind == "mutex" && !w.redlock && probe.IntN(4) == 0 {
			w.askTTL(h)
		}
		step := min(left, 10*time.Millisecond)
		if until := time.Until(h.lk.ValidUntil()); edge && until > 0 && until < left {
			// Check at the very moment the trust runs out, when the
			// watchdog wakes too: which goes first is up to the scheduler.
			step = until
		}
		time.Sleep(step)
		left -= step
		if !w.chk.claim(h) {
			w.watchLost(h, ttl, li)
			return
		}
		switch {
		case (w.fam == "extend" || w.fam == "redlock") && r.IntN(2) == 0:
			// Two lease changes of the holder's own at once, a short
			// and a long one, racing each other and the renewals.
			// Mostly the long one first, so that the short one is the
			// later change, which Redis keeps if it runs.
			ds := []time.Duration{w.lease(pick(r, 2*ttl, 3*ttl)), pick(r, ttl/4, ttl/3, ttl/2)}
			if r.IntN(4) == 0 || w.redlock && r.IntN(3) == 0 {
				// The short one first: on Redlock, its copy reaching a
				// node after the long one must change nothing there.
				ds[0], ds[1] = ds[1], ds[0]
			}
			w.chk.extending(h, ds...)
			var eg sync.WaitGroup
			for i, d := range ds {
				ctx, cancel := opCtx(r)
				eg.Go(func() {
					defer cancel()
					time.Sleep(time.Duration(i) * time.Microsecond)
					err := h.lk.Extend(ctx, d)
					w.tr.Add("%s extended %s#%d to %v: %v", h.g, h.kind, h.id, d, err)
				})
			}
			eg.Wait()
			// Work on under the longer lease: a holder that trusts it
			// while Redis keeps the shorter one is caught by the next.
			left += ds[0] + ds[1]
		case w.extendNow(r):
			// A lease change of the holder's own, maybe shorter, while
			// renewals come and go.
			d := w.lease(pick(r, ttl/3, ttl/2, ttl, 2*ttl))
			w.chk.extending(h, d)
			ctx, cancel := opCtx(r)
			err := h.lk.Extend(ctx, d)
			cancel()
			w.tr.Add("%s extended %s#%d to %v: %v", h.g, h.kind, h.id, d, err)
		}
	}
}

// watchLost checks, for a mutex whose Err says it was lost while the key
// still carries its token, that the key is not kept alive afterwards:
// a lease change already in flight may still land (it was sent before the
// lock was judged lost), but by the time every such change could have
// landed and run out (the longest delay of the fault layer, plus the
// longest lease any of them asked for) the key must be gone, or at least
// no longer pushed out.
func (w *world) watchLost(h *hold, ttl time.Duration, li int) {
	if w.srv == nil || h.kind != "mutex" || !errors.Is(h.lk.Err(), padlock.ErrLockLost) || w.isClosed(li) {
		return
	}
	rk := w.lockers[li].RedisKey(h.key)
	// The latest end of the key under the holder's token, on any node.
	expiry := func() (time.Time, bool) {
		var end time.Time
		for _, s := range w.serversOf(rk) {
			v, err := s.M.Get(rk)
			if err != nil || !strings.Contains(v, h.lk.Token()) {
				continue
			}
			end = latest(end, time.Now().Add(s.M.TTL(rk)))
		}
		return end, !end.IsZero()
	}
	t0 := time.Now()
	e0, ok := expiry()
	if !ok {
		return
	}
	w.tr.Add("%s watches %s#%d: lost, its key expires at %.3fs", h.g, h.kind, h.id, e0.Sub(w.tr.Start()).Seconds())
	// The longest lease a change in flight may set: the lock's own, or
	// one an Extend asked for (the extend family asks for up to 3 leases).
	window := maxInFlight + 2*w.chk.longestLease(h, ttl)
	for end := t0.Add(window); time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		if _, ok := expiry(); !ok {
			return
		}
	}
	if e, ok := expiry(); ok && e.After(e0) && !w.pausedIn(t0.Add(-maxInFlight), time.Now()) && !w.isClosed(li) {
		w.chk.fail(invRenewedLost, t0.Sub(w.tr.Start()), "%s: Err reported lost at %.3fs with the key to expire at %.3fs; %v later the key is still held, to expire at %.3fs",
			h, t0.Sub(w.tr.Start()).Seconds(), e0.Sub(w.tr.Start()).Seconds(), window, e.Sub(w.tr.Start()).Seconds())
	}
}

// maxInFlight bounds how late the fault layer lets a command run after it
// was sent (explore.Plan: stalls up to 750ms, delays up to 1s), pauses
// aside.
const maxInFlight = 2 * time.Second

// letGo ends h: Release, sometimes with a context that ends
// mid-operation, or (mutex families) ReleaseAfter, or (resume) Detach,
// the Ownership resumed by one goroutine or two (a job delivered twice).
// Now and then its holder calls Extend at once (it may pass its check
// before the release and send after it), or after: a released handle
// changes nothing.
func (w *world) letGo(r *rand.Rand, h *hold, li int, o padlock.Options) {
	ctx, cancel := opCtx(r)
	if cr := w.rng(-1300000 - h.id); w.fleetFaults && w.fleetSeed && cr.IntN(3) == 0 {
		// A faulted fleet seed's holders often let go on a short
		// deadline (drawn apart), which a release held up on its way
		// (stalledReleases) outlasts: the release must be sent again.
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), time.Duration(1+cr.IntN(50))*time.Millisecond)
	}
	defer cancel()
	from := w.chk.now()
	w.chk.releasing(h)
	var racing sync.WaitGroup
	defer racing.Wait()
	raced := r.IntN(5) == 0
	if raced {
		d := w.lease(pick(r, o.TTL/2, 2*o.TTL))
		w.chk.extending(h, d)
		ectx, ecancel := opCtx(r)
		racing.Go(func() {
			defer ecancel()
			err := h.lk.Extend(ectx, d)
			w.tr.Add("%s extended %s#%d to %v as it let go: %v", h.g, h.kind, h.id, d, err)
		})
	}
	defer func() {
		if r.IntN(4) != 0 {
			return
		}
		racing.Wait()
		d := w.lease(pick(r, o.TTL/2, 2*o.TTL))
		if err := h.lk.Extend(ctx, d); err == nil {
			w.chk.fail(invReleasedHandle, w.chk.now(), "%s: Extend(%v) of the handle let go returned nil", h, d)
		}
	}()
	if w.fam == "resume" && h.kind == "mutex" && r.IntN(2) == 0 {
		own, err := h.lk.Detach()
		w.tr.Add("%s detached %s#%d: %v", h.g, h.kind, h.id, err)
		if err != nil {
			return
		}
		w.chk.released(h)
		for range 1 + r.IntN(3)/2 {
			a := int(w.actors.Add(1))
			lj, wait := r.IntN(len(w.lockers)), time.Duration(r.IntN(int(o.TTL/2)))
			w.wg.Go(func() { w.resumer(a, lj, own, h, wait) })
		}
		if lr := w.rng(-700 - h.id); lr.IntN(3) == 0 {
			// A job delivered again long after: the lease has run out,
			// or another delivery took the lock over and let it go.
			a := int(w.actors.Add(1))
			lj := lr.IntN(len(w.lockers))
			wait := maxInFlight + w.chk.longestLease(h, o.TTL) + time.Duration(lr.IntN(int(o.TTL)))
			w.wg.Go(func() { w.resumer(a, lj, own, h, wait) })
		}
		return
	}
	if (w.fam == "keep" || (w.fam == "fair" || w.fam == "cluster" || w.redlock) && r.IntN(4) == 0) && h.lk.Err() == nil {
		d := w.lease(pick(r, 200*time.Millisecond, time.Second, 3*time.Second))
		err := h.lk.ReleaseAfter(ctx, d)
		w.tr.Add("%s ReleaseAfter(%v) %s#%d: %v", h.g, d, h.kind, h.id, err)
		if err == nil {
			w.chk.releasedAfter(h, from, d)
		}
		return
	}
	if lr := w.rng(-600 - h.id); o.NoRenew && h.lk.Err() != nil && lr.IntN(2) == 0 {
		// A holder that comes back late to let go of a fixed lease it
		// lost: by now the lease has run out in Redis too.
		time.Sleep(time.Until(w.tr.Start().Add(h.start + o.TTL + time.Duration(1+lr.IntN(20))*time.Millisecond)))
	}
	valid, held := h.lk.ValidUntil(), h.lk.Err() == nil
	calledAt := w.chk.now()
	err := h.lk.Release(ctx)
	w.tr.Add("%s released %s#%d: %v", h.g, h.kind, h.id, err)
	if err == nil {
		w.chk.released(h)
		w.chk.releasedTruthfully(h, calledAt, o.TTL)
	} else {
		w.chk.releaseFailedAt(h)
	}
	// A release that returned before the lock's trust ran out ran every
	// copy of its commands while the token held the lock (the lease in
	// Redis outlasts the trust; only copies whose reply was lost run
	// later, and those end in an error): it must not report that it
	// found the lock gone. (Not when an Extend raced it: a shorter one
	// lowers the trust after it was read.)
	// A restart without persistence while it was held dropped the lock,
	// which its holder trusts until a renewal or this release finds it
	// gone (the named window). On Redlock, a restart dropped the lock
	// from a node, and renewals reach only the others: a second restart,
	// up to a max lease later, leaves too few nodes holding it.
	now := w.chk.now()
	window := min(from, h.start) - maxInFlight
	if w.redlock {
		window -= exploreMaxLease
	}
	if errors.Is(err, padlock.ErrNotHeld) && held && !raced && time.Now().Before(valid) && !w.restartIn(window, now) {
		w.chk.fail(invReleaseNotHeld, now, "%s: Release called at %.3fs, trusted until %.3fs, returned %v", h, from.Seconds(), valid.Sub(w.tr.Start()).Seconds(), err)
	}
}
