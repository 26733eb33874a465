package padlock

import (
	"context"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// The waiters' line: a Locker's waiting Acquires, one line per lock key,
// oldest first, kept in the notifier (notifier.keys, guarded by
// notifier.mu). A waiting Acquire joins the line (join, enter), asks it
// whose turn it is (isFirst, live), sleeps in it (park) and is woken from
// it, by a notice (wait_notify.go), by a hand-off (wait_handoff.go) or by
// its own timer, and leaves it (leave). A mutex's line wakes its first
// waiter; a hold's (wait_hold.go) may let several in at once (wakePolicy).

// keyWaiters are the local waiters for one lock key, oldest first.
type keyWaiters struct {
	waiters []*waiter
	conn    *redis.PubSub // nil when subscribing failed
	// ready is closed once the SUBSCRIBE was confirmed or failed to send.
	// A SUBSCRIBE that Redis refuses leaves it open: go-redis drops the
	// error reply (see live).
	ready chan struct{}
	live  bool // confirmed: notices for the key arrive
	// wanters are the other Lockers whose waiters asked for the key, and
	// when they last did: a lock held here yields to one of them when it
	// goes back to Redis (see wait_handoff.go).
	wanters map[string]time.Time
	// wake says whom a notice wakes: a mutex's waiters (the zero value)
	// or a hold's (wait_hold.go).
	wake wakePolicy
	// missed are the last hold waiter tokens that notices named while
	// no such waiter was in line (wait_hold.go).
	missed []string
	// grants are the tokens of the last grants at release that notices
	// announced, until the waiter they are for claims them (wait_bid.go).
	grants []string
	// grantEnds is when the last grant at release to another Locker's
	// waiter that a notice announced ends, unless its waiter claims it.
	grantEnds time.Time
	// lineBids are the bids that waiters behind the first left, or that a
	// release placed for the first, which the first takes over
	// (wait_bid.go).
	lineBids []bidSent
	// bidComing: a release that may place a bid for the first waiter is
	// on its way, so a grant to another Locker does not make the first
	// waiter ask for one.
	bidComing bool
}

// waiter is one waiting Acquire.
type waiter struct {
	a    *acquisition  // its token, options and key
	wake chan struct{} // capacity 1: a wake-up is never lost, never doubled
	kw   *keyWaiters
	// bidsInLine: a's bids go through the line (acquisition.bidsInLine),
	// so a release may bid for it (nextBid).
	bidsInLine bool

	h *holdAcquisition // instead of a: a hold's waiter (wait_hold.go)

	// Guarded by notifier.mu.
	parked bool // asleep until woken: a lock may be handed to it
	// parkedLive: notices were live when it last parked, so no
	// subscription outcome is coming to wake it (tests wait for this).
	parkedLive bool
	handed     *Lock // the lock handed to it, until it takes it (unpark)
	kicked     bool  // a hold's waiter: a notice came for it since it last tried
	// inTurn: it was in line when its Locker's turn with the key began,
	// so it may be handed the key though another Locker wants it
	// (wait_handoff.go).
	inTurn bool
	// requeue: a fair waiter that a hand-off took off the queue in Redis
	// without giving it the lock; its next attempt asks to be queued
	// again (wait_handoff.go).
	requeue bool
	// bids are the tokens a grant at release to this waiter may name,
	// and standing whether Redis confirmed one of its bids (wait_bid.go).
	bids     []string
	standing bool
	// resleep: a notice changed when the waiter should look again (a
	// grant to another Locker's waiter that may go unclaimed), not
	// whether it should try now.
	resleep bool
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// wakePolicy says whom a notice on a channel wakes in a Locker.
type wakePolicy uint8

const (
	wakeMutex wakePolicy = iota // the mutex's rules (wait_notify.go)
	wakeOne                     // a semaphore's: a release frees one permit
	wakeAll                     // a read-write lock's: a writer's release lets every reader in
)

// state reports whether some local Acquire already waits for channel (a
// newcomer then queues behind it instead of barging in), and whether
// notices for channel are known to arrive.
func (n *notifier) state(channel string) (waiting, live bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := n.keys[channel]
	if kw == nil {
		return false, false
	}
	return len(kw.waiters) > 0, kw.live
}

// startTurn begins the Locker's turn with the lock on channel, which w
// (nil: an Acquire not in line) took from Redis: the waiters in line
// besides w are handed it before another Locker that wants the key gets
// it (wait_handoff.go).
func (n *notifier) startTurn(channel string, w *waiter) {
	if n.waited.Load() == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if kw := n.keys[channel]; kw != nil {
		for _, x := range kw.waiters {
			x.inTurn = x != w
		}
	}
}

// live reports whether w's notices are known to arrive, and while the
// outcome of the SUBSCRIBE is not known, returns the channel that is
// closed when it is (nil once it is known). Redis may never answer: go-redis
// drops the error reply of a SUBSCRIBE that an ACL refuses (NOPERM), so a
// waiter must not wait for that outcome, only wake when it comes.
func (n *notifier) live(w *waiter) (live bool, pending <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-w.kw.ready:
	default:
		pending = w.kw.ready
	}
	return w.kw.live, pending
}

// join queues a waiter for channel, subscribing to it first if nobody local
// waits for it yet; bidsInLine is a's (acquisition.bidsInLine). A failed
// SUBSCRIBE is not an error: the waiter polls instead. After close, the
// waiter is alone in a line of its own, and park refuses it.
func (n *notifier) join(ctx context.Context, channel string, a *acquisition, bidsInLine bool) *waiter {
	return n.enter(ctx, channel, &waiter{a: a, bidsInLine: bidsInLine, wake: make(chan struct{}, 1)}, wakeMutex)
}

// enter queues w for channel, whose notices wake as policy says, as join
// does.
func (n *notifier) enter(ctx context.Context, channel string, w *waiter, policy wakePolicy) *waiter {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		w.kw = &keyWaiters{ready: make(chan struct{}), waiters: []*waiter{w}}
		close(w.kw.ready)
		return w
	}
	kw := n.keys[channel]
	fresh := kw == nil
	if fresh {
		kw = &keyWaiters{ready: make(chan struct{}), wake: policy}
		n.keys[channel] = kw
		n.waited.Add(1)
	}
	kw.waiters = append(kw.waiters, w)
	w.kw = kw
	if w.h != nil {
		kw.named(w)
	}
	n.mu.Unlock()
	if !fresh {
		return w
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), subscribeTimeout)
	conn, err := n.subscribe(sctx, channel)
	cancel()
	n.mu.Lock()
	// go-redis keeps a channel it failed to subscribe to and subscribes on
	// reconnect: keep the conn either way, so that leave unsubscribes.
	kw.conn = conn
	if err != nil {
		kw.markReady(false) // poll instead
	}
	n.mu.Unlock()
	return w
}

// markReady records the SUBSCRIBE's outcome. A confirmation may come after
// a failure was recorded (go-redis subscribes again on reconnect): notices
// arrive from then on. n.mu is held.
func (kw *keyWaiters) markReady(live bool) {
	kw.live = kw.live || live
	select {
	case <-kw.ready:
	default:
		close(kw.ready)
	}
}

// park marks w asleep: from now until unpark, a lock may be handed to it.
// It returns false, leaving w awake, once the notifier is closed: nothing
// would wake w but its own timer.
func (n *notifier) park(w *waiter) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	w.parked, w.parkedLive = true, w.kw.live
	return true
}

// unpark marks w awake and returns the lock handed to it meanwhile, if
// any, whether it must ask to be queued again (waiter.requeue), and
// whether what woke it only asks it to sleep again (waiter.resleep).
func (n *notifier) unpark(w *waiter) (lk *Lock, requeue, resleep bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w.parked = false
	lk, requeue, resleep = w.handed, w.requeue, w.resleep
	w.handed, w.requeue, w.resleep = nil, false, false
	return lk, requeue, resleep
}

// grantEnds returns when the last grant to another Locker's waiter that
// w's Locker heard of ends unless claimed (keyWaiters.grantEnds).
func (n *notifier) grantEnds(w *waiter) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return w.kw.grantEnds
}

// unclaimed returns the lock handed to w, which has left the line, that
// it did not take: a fair waiter may be handed the lock while it is
// awake (wait_handoff.go), and leave before it sleeps again.
func (n *notifier) unclaimed(w *waiter) *Lock {
	n.mu.Lock()
	defer n.mu.Unlock()
	lk := w.handed
	w.handed = nil
	return lk
}

// isFirst reports whether w is first in line for its key.
func (n *notifier) isFirst(w *waiter) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(w.kw.waiters) > 0 && w.kw.waiters[0] == w
}

// leave takes w out of line. When w was first and did not get the lock, the
// next waiter is woken to try in its place. Leaving again does nothing.
// When w was the last in line, it returns the bids that waiters passed to
// the line (wait_bid.go), which nobody is left to claim: the caller
// withdraws them.
func (n *notifier) leave(channel string, w *waiter, acquired bool) (orphans []bidSent) {
	n.mu.Lock()
	kw := n.keys[channel]
	if kw == nil || kw != w.kw {
		n.mu.Unlock()
		return nil
	}
	wasFirst := len(kw.waiters) > 0 && kw.waiters[0] == w
	for i, x := range kw.waiters {
		if x == w {
			kw.waiters = append(kw.waiters[:i], kw.waiters[i+1:]...)
			break
		}
	}
	if len(kw.waiters) > 0 {
		switch {
		case kw.wake != wakeMutex:
			kw.passOn(w)
		case wasFirst && !acquired:
			kw.waiters[0].signal()
		}
		if !slices.ContainsFunc(kw.waiters, claimsLineBids) {
			// Fair waiters are left, which never claim a default-mode
			// grant: the bids passed to the line have nobody to claim
			// them, and the caller withdraws them.
			orphans, kw.lineBids = kw.lineBids, nil
		}
		n.mu.Unlock()
		return orphans
	}
	delete(n.keys, channel)
	n.waited.Add(-1)
	conn := kw.conn
	orphans, kw.lineBids = kw.lineBids, nil
	n.mu.Unlock()
	if conn == nil {
		return orphans
	}
	// Behind the waiter, which must not wait for it: go-redis holds a
	// subscription's commands while it dials the server again, past any
	// deadline, so a hung server would hold the caller's answer for its
	// read timeout. A waiter that comes back for the channel meanwhile
	// subscribes again, and if its SUBSCRIBE reaches Redis first, the
	// confirmation of this UNSUBSCRIBE subscribes it once more
	// (unsubscribed).
	n.goBehind(func() {
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		defer cancel()
		_ = n.send(ctx, conn, false, channel)
	})
	return orphans
}

// The line's share of the bids (wait_bid.go): the tokens each waiter's
// bids may name, the bids passed to the line, and the grants that notices
// announced, which wake the waiter they are for. When a waiter passes,
// takes over or claims them is its acquisition's to decide
// (wait_acquire.go); the line keeps them, first the calls a waiter makes,
// then those of a release and of a notice.

// setBids tells the notifier which tokens w's bids may name, so that a
// grant notice for one of them wakes it, and whether Redis confirmed that
// one of them stands.
func (n *notifier) setBids(w *waiter, tokens []string, standing bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w.bids = append(w.bids[:0], tokens...)
	w.standing = standing
}

// passBids moves b, the bids of w, which has just joined its line behind
// another waiter, to the line, whose first waiter takes them over.
func (n *notifier) passBids(w *waiter, b *bids) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(w.kw.waiters) == 0 || w.kw.waiters[0] == w {
		return
	}
	w.kw.lineBids = append(w.kw.lineBids, b.sent...)
	b.reset()
	w.bids, w.standing = w.bids[:0], false
}

// takeLineBids moves into b, the bids of w when w is first in its line,
// the bids passed to the line that asked for the lease ttl and renewal
// noRenew (bids.takeOver), and returns the others, taken out of the line.
func (n *notifier) takeLineBids(w *waiter, b *bids, ttl time.Duration, noRenew bool) (other []bidSent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := w.kw
	if len(kw.lineBids) == 0 || len(kw.waiters) == 0 || kw.waiters[0] != w {
		return nil
	}
	other = b.takeOver(kw.lineBids, ttl, noRenew)
	kw.lineBids = kw.lineBids[:0]
	w.bids, w.standing = append(w.bids[:0], b.tokens()...), b.standing()
	return other
}

// bidComing reports whether a release on its way may place a bid for
// w's line (keyWaiters.bidComing, nextBid).
func (n *notifier) bidComing(w *waiter) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return w.kw.bidComing
}

// takeGrant reports, and forgets, a grant that a notice announced for
// one of the bids sent.
func (n *notifier) takeGrant(channel string, sent []bidSent) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := n.keys[channel]
	if kw == nil {
		return false
	}
	took := false
	kw.grants = slices.DeleteFunc(kw.grants, func(g string) bool {
		named := slices.ContainsFunc(sent, func(b bidSent) bool { return b.id.token == g })
		took = took || named
		return named
	})
	return took
}

// leaveBids moves b, the bids of w, which leaves its line with the lock,
// to the line, whose next first waiter takes them over, and reports
// whether it did: not when w is alone in it.
func (n *notifier) leaveBids(w *waiter, b *bids) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := w.kw
	if len(kw.waiters) < 2 || !slices.Contains(kw.waiters, w) ||
		!slices.ContainsFunc(kw.waiters, func(x *waiter) bool { return x != w && claimsLineBids(x) }) {
		return false
	}
	kw.lineBids = append(kw.lineBids, b.sent...)
	b.reset()
	w.bids, w.standing = w.bids[:0], false
	return true
}

// claimsLineBids reports whether x may claim the bids passed to its line
// (granted): a default-mode lock's waiter. A fair waiter is granted the
// key only by fair releases (docs/locks.md), so bids passed to a line of
// fair waiters alone would be granted to nobody.
func claimsLineBids(x *waiter) bool { return x.a != nil && !x.a.o.Fair }

// nextBid returns the bid for kw's first waiter that a release granting
// the key to another Locker's waiter places, or nil when that waiter does
// not bid. n.mu is held.
func (kw *keyWaiters) nextBid() *releaseBid {
	if len(kw.waiters) == 0 {
		return nil
	}
	w := kw.waiters[0]
	if !w.bidsInLine {
		return nil
	}
	kw.bidComing = true
	// A mutex's attempts' identity (acquisition.mintNext), minted from the
	// waiter's key and options.
	return &releaseBid{id: mintID(w.a.l.keys, w.a.key, w.a.o), noRenew: w.a.o.NoRenew}
}

// maxGrants bounds keyWaiters.grants: a grant is for the first waiter of
// one Locker, which looks for it as soon as its attempt returns.
const maxGrants = 8

// granted records a grant notice for the waiters of kw: it wakes the
// waiter whose bid it names, if it is in line, to claim it. A grant to
// another Locker's waiter holds the key until that waiter claims it, or
// for hold at most: the waiter here that tries looks again then, in case
// nobody claims it (a waiter that died, or forgot the token). n.mu is
// held.
func (kw *keyWaiters) granted(token string, hold time.Duration) {
	if len(kw.grants) == maxGrants {
		kw.grants = append(kw.grants[:0], kw.grants[1:]...)
	}
	kw.grants = append(kw.grants, token)
	for _, w := range kw.waiters {
		if w.a != nil && slices.Contains(w.bids, token) {
			w.signal()
			return
		}
	}
	if slices.ContainsFunc(kw.lineBids, func(b bidSent) bool { return b.id.token == token }) {
		// Passed to the line: the first waiter claims it.
		for _, w := range kw.waiters {
			if w.a != nil && !w.a.o.Fair {
				w.signal()
				return
			}
		}
	}
	kw.grantEnds = time.Now().Add(hold)
	for _, w := range kw.waiters {
		switch {
		case w.a == nil:
		case w.a.o.Fair:
			// Each fair waiter tries for itself.
			w.resleep = true
			w.signal()
			continue
		case !w.standing && !kw.bidComing && !slices.ContainsFunc(kw.lineBids, func(b bidSent) bool { return b.busy }):
			// The first waiter here has no bid in Redis: it asks now,
			// so that the key comes back to this Locker in its turn,
			// unless the release that made the grant bids for it.
			w.signal()
		default:
			w.resleep = true
			w.signal()
		}
		return
	}
}

// parkHold marks w asleep, unless a notice woke it since it last slept
// (sleep false: try now) or the notifier is closed (open false).
func (n *notifier) parkHold(w *waiter) (sleep, open bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false, false
	}
	if w.kicked {
		w.kicked = false
		w.drain()
		return false, true
	}
	w.parked, w.parkedLive = true, w.kw.live
	return true, true
}

// unparkHold marks w awake; whatever woke it is used up.
func (n *notifier) unparkHold(w *waiter) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w.parked, w.kicked = false, false
	w.drain()
}

func (w *waiter) drain() {
	select {
	case <-w.wake:
	default:
	}
}

// kick marks w woken and wakes it. n.mu is held.
func (w *waiter) kick() {
	w.kicked = true
	w.signal()
}

// named wakes w, just entered, if a notice named it before it was in
// line. n.mu is held.
func (kw *keyWaiters) named(w *waiter) {
	if w.h.named == "" {
		return
	}
	for i, m := range kw.missed {
		if m == w.h.named {
			kw.missed = append(kw.missed[:i], kw.missed[i+1:]...)
			w.kick()
			return
		}
	}
}

// kickOne wakes one waiter: the oldest asleep, or else the oldest whose
// attempt is on its way and was not woken yet. n.mu is held.
func (kw *keyWaiters) kickOne() {
	for _, w := range kw.waiters {
		if w.parked && !w.kicked {
			w.kick()
			return
		}
	}
	for _, w := range kw.waiters {
		if !w.kicked {
			w.kick()
			return
		}
	}
}

// passOn hands the wake-up that w, leaving the line, did not use to the
// next waiter: the permit it announced may still be free. n.mu is held.
func (kw *keyWaiters) passOn(w *waiter) {
	if w.kicked && kw.wake == wakeOne {
		kw.kickOne()
	}
}

// maxMissed bounds keyWaiters.missed: a waiter enters the line right
// after its first attempt, so only the latest few notices can be for it.
const maxMissed = 8

// kickHolds wakes every hold waiter for which match holds: their hold
// may be free for them now (Semaphore.SetPermits).
func (n *notifier) kickHolds(match func(*holdAcquisition) bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, kw := range n.keys {
		for _, w := range kw.waiters {
			if w.h != nil && match(w.h) {
				w.kick()
			}
		}
	}
}
