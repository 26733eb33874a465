package padlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/explore"
	"github.com/redis/go-redis/v9"
)

// The idle invariant: nobody holds for nobody ("Nobody holds for
// nobody", docs/locks.md; wait_claim.go). In the fleet runs (one node or
// the Cluster in memory, one key, command faults in half of them) waiters
// that are not there are the faults: one
// run in two kills a Locker (its commands fail from then on, its notices
// are lost, as with a process killed with SIGKILL) while its waiters wait
// and its holders hold, and one in two loses grant notices now and then;
// waiters give up by their contexts in every run. Then no stretch longer
// than idleBound may pass while a live waiter waits for the key and no
// live party holds it, where a killed Locker's holder holds it until its
// lease ends (a dead holder costs its lease), a holder whose Release
// failed holds it a clean-up's bound more (the release goes on behind
// it), and a pause or restart of the server excuses the stretches up to
// a lease after it; and none longer than
// quietIdleBound that no fault explains (excusedIdle).
const invIdle = "idle"

// idleBound is what the invariant allows: the claim window (a grant
// nobody claims), a recheck (a waiter whose grant notice was lost looks
// again within one), and round trips.
const idleBound = padlock.ClaimWindow + time.Second + 100*time.Millisecond

// doom draws, for a fleet run of nLockers, whether its last Locker is
// killed, and when (a share of the run); the kill takes effect through
// the hook (killer) on its client and through its notices (noticesOf).
func (w *world) doom(nLockers int) {
	w.doomed = -1
	w.killedNs.Store(-1)
	w.fleetTTL = pick(w.rng(-885), 5*time.Second, 30*time.Second)
	// Every fair fleet kills one (its fleets are few: one fair run in
	// three): a fair waiter killed in the queue leaves its entry there.
	if dr := w.rng(-880); w.fleet && (dr.IntN(2) == 0 || w.fam == "fair") {
		// Within the first 60% of the run: a kill needs bidLife, a
		// claim window and a recheck (its excuse) and then more than the
		// idle bound after it for a stall it leaves to show, 5 s or so,
		// which a kill late in a 16 s run never has.
		w.doomed, w.killShare = nLockers-1, killShareMax*dr.Float64()
		// One kill in two falls at a grant to the doomed Locker: a
		// waiter killed as the release names it (a grant nobody will
		// claim, in either mode).
		w.killAtGrant = dr.IntN(2) == 0
	}
	if lr := w.rng(-890); w.fleet && lr.IntN(2) == 0 {
		w.grantsLost = true
	}
	// One fleet in two has an impatient Locker, and every fleet seed's,
	// whose waiters give up within 600 ms: its give-ups withdraw its
	// bids, and the last of its line the bids passed to the line, while
	// others' releases grant.
	w.impatient = -1
	if ir := w.rng(-895); w.fleet && (ir.IntN(2) == 0 || w.fleetSeed) {
		w.impatient = ir.IntN(nLockers)
		if qr := w.rng(-896); w.fam == "mutex" && qr.IntN(2) == 0 {
			w.quitShare = 0.3 + 0.5*qr.Float64()
		}
		w.impatientHonest = w.fleetFaults && w.fleetSeed && w.rng(-897).IntN(2) == 0
	}
}

// planOf returns the fault plan of Locker i's client: the run's, but
// none for an honest impatient Locker's (impatientHonest).
func (w *world) planOf(i int) *explore.Plan {
	if i != w.impatient || !w.impatientHonest {
		return w.plan
	}
	p := *w.plan
	p.Rate, p.ConnRate, p.RefuseRate = 0, 0, 0
	return &p
}

// closingBy reports whether Close was called on Locker li by at: the
// sends again that go behind an operation stop then.
func (w *world) closingBy(li int, at time.Duration) bool {
	c := time.Duration(w.closingAt[li].Load())
	return c != 0 && c <= at
}

// quit reports whether Locker li, the impatient one, has stopped
// starting operations (quitShare).
func (w *world) quit(li int) bool {
	if li != w.impatient || w.quitShare == 0 {
		return false
	}
	start := w.tr.Start()
	return time.Now().After(start.Add(time.Duration(float64(w.end.Sub(start)) * w.quitShare)))
}

// killer is a go-redis hook that fails every command once its Locker is
// killed: nothing of a dead process reaches Redis. It sits below the
// fault hook, which sees the failure and, told Gone, decides no fault for
// a dead process's command (a delayed one would run later, without it).
type killer struct{ dead *atomic.Bool }

var errKilled = errors.New("explore: the process was killed")

func (k killer) DialHook(next redis.DialHook) redis.DialHook { return next }

func (k killer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if k.dead.Load() {
			cmd.SetErr(errKilled)
			return errKilled
		}
		return next(ctx, cmd)
	}
}

func (k killer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if k.dead.Load() {
			for _, c := range cmds {
				c.SetErr(errKilled)
			}
			return errKilled
		}
		return next(ctx, cmds)
	}
}

// noticesOf sets, for a fleet run, what becomes of Locker i's notices:
// none once it is killed, and, in runs that lose grant notices, one
// grant notice in four lost; and it tells the claimed invariant of each.
func (w *world) noticesOf(l *padlock.Locker, i int) {
	if !w.fleet {
		return
	}
	r := w.rng(-895 - i)
	gr := w.rng(-1895 - i) // drawn apart: the grants' give-ups
	var n atomic.Int64
	padlock.SetNoticeFault(l, func(channel, payload string) (int, time.Duration) {
		if w.doomed == i && w.dead.Load() || w.atGrant(i, payload, gr) {
			w.sawNotice(i, channel, payload, true)
			return 0, 0
		}
		if w.grantsLost && strings.HasPrefix(payload, "g") && int(uint64(r.Int64()+n.Add(1))%4) == 0 {
			w.tr.Add("L%d: grant notice %q lost", i, payload)
			w.sawNotice(i, channel, payload, true)
			return 0, 0
		}
		w.sawNotice(i, channel, payload, false)
		return 1, 0
	})
}

// kill kills the doomed Locker at its share of run, at the first moment
// from then that it holds nothing: a dead holder costs its lease, which
// the invariant excuses, so the kill falls where its waiters are all it
// has (a grant in flight to one may still make it a holder).
func (w *world) kill(run time.Duration) {
	if w.doomed < 0 {
		return
	}
	suffix := fmt.Sprintf("@L%d", w.doomed)
	w.wg.Go(func() {
		time.Sleep(time.Duration(w.killShare * float64(run)))
		if w.killAtGrant {
			// noticesOf kills it at the next grant to it; if none comes
			// within killGrantWait, it dies here after all.
			w.killArmed.Store(true)
			time.Sleep(killGrantWait)
		}
		for time.Now().Before(w.end) && w.holding(suffix) {
			time.Sleep(time.Millisecond)
		}
		w.die("")
	})
}

// killShareMax bounds the share of a fleet run at which its doomed
// Locker is killed.
const killShareMax = 0.6

// killGrantWait is how long a kill at a grant waits for a grant to the
// doomed Locker before it kills it anyway.
const killGrantWait = 3 * time.Second

// die kills the doomed Locker now, unless it is dying already; how says
// at what, for the trace.
func (w *world) die(how string) bool {
	if !w.killing.CompareAndSwap(false, true) {
		return false
	}
	w.tr.Add("L%d killed%s", w.doomed, how)
	w.killedNs.Store(int64(w.chk.now()))
	w.dead.Store(true)
	return true
}

// atGrant is told of each grant notice Locker i hears in a fleet run,
// before it is delivered, and says whether it is lost: the doomed Locker,
// armed to die at a grant, dies at one to its own bid (so the notice is
// lost with it); the impatient Locker's waiters all give up at one grant
// to it in three, as it arrives.
func (w *world) atGrant(i int, payload string, r *rand.Rand) (lost bool) {
	token, ok := grantToken(payload)
	if !ok || w.ownerOf(token) != i {
		return false
	}
	if i == w.doomed && w.killArmed.Load() && !w.holding(fmt.Sprintf("@L%d", i)) && w.die(fmt.Sprintf(" at the grant to %s", token)) {
		return true
	}
	if i == w.impatient && r.IntN(3) == 0 {
		w.giveUpsMu.Lock()
		n := len(w.giveUps)
		for _, cancel := range w.giveUps {
			cancel()
		}
		w.giveUpsMu.Unlock()
		if n > 0 {
			w.tr.Add("L%d: its %d waiters give up at the grant to %s", i, n, token)
		}
	}
	return false
}

// waitsOn registers, for the impatient Locker, the cancel of an
// operation's context for atGrant; the returned func unregisters it.
func (w *world) waitsOn(li int, op *opSeen, cancel context.CancelFunc) func() {
	if li != w.impatient {
		return func() {}
	}
	w.giveUpsMu.Lock()
	defer w.giveUpsMu.Unlock()
	if w.giveUps == nil {
		w.giveUps = map[*opSeen]context.CancelFunc{}
	}
	w.giveUps[op] = cancel
	return func() {
		w.giveUpsMu.Lock()
		defer w.giveUpsMu.Unlock()
		delete(w.giveUps, op)
	}
}

// holding reports whether a goroutine whose name ends in suffix (its
// Locker's) holds a lock now.
func (w *world) holding(suffix string) bool {
	c := w.chk
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.holds {
		if strings.HasSuffix(h.g, suffix) && h.released < 0 && h.releaseCalled < 0 {
			return true
		}
	}
	return false
}

// killedAt returns when the doomed Locker was killed, since the start
// (-1 until then).
func (w *world) killedAt() time.Duration { return time.Duration(w.killedNs.Load()) }

// killedNow reports whether Locker li is dead.
func (w *world) killedNow(li int) bool { return li == w.doomed && w.dead.Load() }

// checkIdle checks the idle invariant on a fleet run.
func (w *world) checkIdle() {
	if !w.fleet {
		return
	}
	type span struct{ from, to time.Duration }
	const forever = time.Duration(1 << 60)
	key := w.keys[0]
	killedAt := w.killedAt()
	dead := func(li int) bool { return li == w.doomed && killedAt >= 0 }
	o := w.order
	o.mu.Lock()
	ops := slices.Clone(o.ops)
	o.mu.Unlock()
	c := w.chk
	c.mu.Lock()
	holds := slices.Clone(c.holds)
	c.mu.Unlock()

	lockerOf := map[*hold]int{}
	granted := map[*hold]time.Duration{}
	var waiting []span // live waiters for key
	end := c.now()
	for _, op := range ops {
		op.mu.Lock()
		li, kind, k, began, ended, h := op.li, op.kind, op.key, op.began, op.ended, op.hold
		if h != nil {
			lockerOf[h], granted[h] = li, op.granted
		}
		op.mu.Unlock()
		if kind != "mutex" || k != key {
			continue
		}
		if ended < 0 {
			ended = end
		}
		if dead(li) {
			ended = min(ended, killedAt)
		}
		if ended > began {
			waiting = append(waiting, span{began, ended})
		}
	}
	var held []span
	for _, h := range holds {
		if h.key != key {
			continue
		}
		c.mu.Lock()
		released, called, failed := h.released, h.releaseCalled, h.releaseFailed
		c.mu.Unlock()
		from := h.began - maxInFlight
		if g, ok := granted[h]; ok && g >= 0 {
			from = g - progressTrip
		}
		to := forever
		li, known := lockerOf[h]
		switch {
		case released >= 0:
			to = released
		case known && dead(li):
			// A dead holder holds the key until its lease ends.
			to = max(killedAt, h.began) + maxInFlight + c.longestLease(h, 0)
		case known && failed >= 0 && !w.closingBy(li, failed+padlock.CleanupTimeout):
			// A release that Redis did not answer goes on behind
			// Release, sent again until Redis answers, within a
			// clean-up's bound (lock.go letGo); each send's fault holds
			// the key its own window.
			to = failed + padlock.CleanupTimeout + maxInFlight
		case called >= 0:
			to = called + maxInFlight + c.longestLease(h, 0)
		}
		held = append(held, span{from, to})
	}
	// A command's fault may keep the key, for someone, as long as the
	// fault lasts (faultReach).
	for li := range w.lockers {
		for _, f := range w.faultWindows(li) {
			if dead(li) && f.to+padlock.CleanupTimeout >= killedAt {
				// A command the killed Locker sent may run after its
				// death, take the key and hold it, for nobody alive,
				// its lease: a dead holder's. So may one that ran just
				// before it, whose clean-up, sent again until Redis
				// answers within a clean-up's bound, the kill cut short.
				f.to += 2 * w.fleetTTL
			}
			held = append(held, span{f.from, f.to})
		}
	}
	slices.SortFunc(held, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	slices.SortFunc(waiting, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	start := w.tr.Start()
	for _, wt := range waiting {
		at, i := wt.from, 0
		for at < wt.to {
			for i < len(held) && held[i].from <= at {
				at = max(at, held[i].to)
				i++
			}
			if at >= wt.to {
				break
			}
			next := wt.to
			if i < len(held) {
				next = min(next, held[i].from)
			}
			// A pause or restart excuses the stretches up to a lease
			// after it: a command it held up may run at the resume and
			// hold the key its lease, and a restart without persistence
			// forgets the burials, so a copy held up in the network that
			// lands after it takes the key for its lease too.
			stopped := at - maxInFlight - w.fleetTTL
			if next-at > idleBound && !w.pausedIn(start.Add(stopped), start.Add(next)) && !c.restartIn(stopped, next) {
				c.fail(invIdle, next, "%s: nobody held the key from %.3fs to %.3fs (%v) while a live waiter waited for it (%.3fs to %.3fs); the bound is %v%s",
					key, at.Seconds(), next.Seconds(), next-at, wt.from.Seconds(), wt.to.Seconds(), idleBound, w.killNote())
				return
			}
			if next-at > quietIdleBound && !w.excusedIdle(at, next) {
				c.fail(invIdle, next, "%s: nobody held the key from %.3fs to %.3fs (%v) while a live waiter waited for it (%.3fs to %.3fs), with no waiter missing, notice lost or server stopped since %.3fs; the bound is then %v%s",
					key, at.Seconds(), next.Seconds(), next-at, wt.from.Seconds(), wt.to.Seconds(), (at - quietLookBack).Seconds(), quietIdleBound, w.killNote())
				return
			}
			at = next
		}
	}
}

// quietIdleBound is what the idle invariant allows a stretch that no
// fault explains (excusedIdle): a release's notice or grant wakes a live
// waiter at once, which takes the key or claims the grant in a round trip
// or two (each at most 1 ms here, on the virtual clock).
const quietIdleBound = 100 * time.Millisecond

// quietLookBack is how far before a stretch a fault may explain it: a
// bid stands for bidLife, a grant for the claim window, and a waiter
// whose notice was lost looks again within a second.
const quietLookBack = padlock.BidLife + padlock.ClaimWindow + time.Second

// excusedIdle reports whether a fault explains a free stretch from at
// to next: a run with no notices (the Cluster in memory), a Locker killed, a grant notice lost or a command faulted
// since quietLookBack before it, or a server paused or restarted since a
// lease before that.
func (w *world) excusedIdle(at, next time.Duration) bool {
	from := at - quietLookBack
	if w.cluster != nil {
		// The Cluster in memory has no sharded pub/sub: every waiter
		// finds the key by its own timer (explore.Cluster).
		return true
	}
	if w.killedAt() >= 0 && w.killedAt() <= next {
		return true
	}
	// A command a pause held up may have run late, and a release whose
	// reply the pause lost may not have: the key then waits for a lease.
	start, stopped := w.tr.Start(), from-w.fleetTTL
	if w.pausedIn(start.Add(stopped), start.Add(next)) || w.chk.restartIn(stopped, next) {
		return true
	}
	// A run that mixes the modes (an AcquireAll is never fair): a fair
	// waiter gets a key a default-mode holder let go only when it finds
	// it free, and the other way round (docs/locks.md, "agree on Fair").
	if w.fam == "fair" && w.anySetWaitedIn(from, next) {
		return true
	}
	// A command's fault: its waiter learns what became of its attempt,
	// or of its bid, within a recheck, as after a lost notice.
	if w.faultedIn(-1, from, next) {
		return true
	}
	g := &w.grants
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.lostAt {
		if t >= from && t <= next {
			return true
		}
	}
	return false
}

// killNote says which Locker was killed, and when, for a failure.
func (w *world) killNote() string {
	if w.doomed < 0 || w.killedAt() < 0 {
		return ""
	}
	return fmt.Sprintf(" (L%d killed at %.3fs)", w.doomed, w.killedAt().Seconds())
}
