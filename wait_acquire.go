package padlock

import (
	"context"
	"errors"
	"slices"
	"time"
)

// One Acquire's life, top-down: Acquire makes the acquisition, which
// without a wait budget is one attempt (try). With one, wait tries, joins
// the Locker's line for a busy key, and in waitInLine sleeps until its
// turn (waitTurn) and tries again, until an attempt takes the lock, a
// holder here hands it over (receive) or the wait ends; then it leaves.
// The line (wait_line.go), the bids its attempts left (wait_bid.go) and
// the notifier (wait_notify.go) are state below it: none calls back up.

// Acquire takes the lock on key, waiting up to o.Wait for a holder to let go.
//
// On success the caller owns the returned Lock and must Release it. When the
// key stays held it returns a *NotAcquiredError matching ErrNotAcquired (and
// ctx.Err() when the context ended the wait) that carries the holder's
// remaining lease. When Redis cannot be reached it returns an error matching
// ErrUnavailable: the lock was not taken, and the caller must not proceed as
// if it were. An empty key or invalid Options return an ErrInvalid error; a
// closed Locker, or one closed while Acquire waits, returns ErrClosed.
//
// Only a busy key is waited for until o.Wait ends. A waiting Acquire gives
// up on an unreachable Redis after two attempts in a row that Redis failed,
// or once such failures have gone on for a second, whichever comes first:
// a refused connection fails in two quick dials, a hung server in one read
// timeout. (On a Redlock Locker an attempt fails so when too few nodes
// answer to decide; a vote split among waiters is tried again.)
//
// A waiting Acquire does not poll. It sleeps until a release notice for the
// key arrives, re-checking at the holder's lease end and at least every
// second in case a notice was lost; while notices cannot be received (the
// subscription failed, or Redis refused it, as it does to an ACL user
// without channel permissions) it retries on o.Retry's schedule instead.
// Either way o.Retry is asked after every failed attempt, and a negative
// backoff ends the wait at once. Only the longest-waiting Acquire per
// Locker and key competes when a notice comes, so a release costs one
// attempt per process, not one per waiter; and a release within the same
// Locker hands the lock straight to that waiter, without asking Redis (see
// Lock.Release).
//
// If ctx carries a lock on key from this Locker (see Lock.Context), Acquire
// returns a reentrant handle on it at once, without asking Redis.
func (l *Locker) Acquire(ctx context.Context, key string, o Options) (*Lock, error) {
	began := time.Now()
	if l.cfg.observer != nil {
		return l.acquireObserved(ctx, key, o, began)
	}
	return l.acquire(ctx, key, o, began, nil)
}

// acquire is Acquire; st, when not nil, gathers what AcquireEnd tells.
func (l *Locker) acquire(ctx context.Context, key string, o Options, began time.Time, st *acquireStats) (*Lock, error) {
	if key == "" {
		return nil, invalid("key", "must not be empty")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if lk := l.reentrant(ctx, key); lk != nil {
		return lk, nil
	}
	if l.watchdog.isClosed() {
		return nil, ErrClosed
	}
	o = o.withDefaults(l.defaults)
	if err := l.cfg.checkLease("Options.TTL", o.TTL); err != nil {
		return nil, err
	}
	id := mintID(l.keys, key, o)
	if o.Wait == 0 {
		// One attempt: this acquisition does not outlive the call (a
		// waiting one is shared with the notifier), so it need not be
		// allocated.
		a := acquisition{l: l, key: key, o: o, id: id, began: began}
		lk, err := a.try(ctx, nil)
		if st != nil {
			st.tries = a.tries
		}
		return lk, err
	}
	a := &acquisition{l: l, key: key, o: o, id: id, began: began, pacing: pacing{deadline: began.Add(o.Wait)}}
	if o.Fair {
		a.at.place = newToken()
	}
	lk, err := a.wait(ctx)
	if st != nil {
		st.tries, st.waited = a.tries, a.w != nil
	}
	return lk, err
}

// noticeRecheck bounds how long a waiter trusts the release notices alone:
// if one was lost, the waiter learns of the release at most this late.
// (Locker.recheck holds it, so tests can prove wake-ups come from notices.)
const noticeRecheck = time.Second

// A waiting Acquire takes Redis for unreachable, and gives up with
// ErrUnavailable, after unreachableAttempts attempts in a row failed, or
// once the first of a run of failed attempts was sent unreachableAfter
// ago: a dead server fails in two quick dials, a hung one in one timeout.
// Any answer, even "busy", ends the run.
const (
	unreachableAttempts = 2
	unreachableAfter    = time.Second
)

// acquisition is one call of Acquire and what its attempts have seen.
type acquisition struct {
	l      *Locker
	key    string
	o      Options
	id     *lockID
	began  time.Time // when Acquire was called
	pacing           // what the attempts have seen; deadline, zero for a single attempt

	at        attempt // what the next attempt of a waiting Acquire sends
	w         *waiter // this Acquire in its Locker's line, once it joined
	liveAtTry bool    // notices for the key arrived when the last attempt was sent
	polling   bool    // when observed: NoticesUnavailable was told (beside liveAtTry: no padding)
	queued    bool    // Fair: Redis confirmed this waiter is queued
	bids      bids    // the attempts that may have left a bid (wait_bid.go)
	// mint makes a hold's identities (a mutex's: nil, mintID); see begin.
	mint func() *lockID
}

// wait is Acquire with a wait budget. It runs as a mutex's Lock does: try;
// while the key is busy, wait for a turn (waitTurn) and try again. Every
// way out of the line goes through its one exit.
func (a *acquisition) wait(ctx context.Context) (*Lock, error) {
	n := a.l.notifier
	channel := a.id.lockKey()
	waiting, live := n.state(channel)
	var (
		lk  *Lock
		err error
	)
	// Non-fair newcomers queue behind this Locker's waiters for the key
	// instead of racing them; fair ones always ask Redis, which keeps the
	// order (their first attempt joins the queue there).
	if a.o.Fair || !waiting {
		a.liveAtTry = live
		lk, err = a.try(ctx, &a.at)
	}
	if lk == nil && err == nil {
		a.w = n.join(ctx, channel, a, a.bidsInLine())
		if len(a.bids.sent) > 0 {
			n.setBids(a.w, a.bids.tokens(), a.bids.standing())
			a.passBids()
		}
		if obs := a.l.cfg.observer; obs != nil {
			obs.AcquireWait(ctx, AcquireWaitEvent{Key: a.key})
		}
		lk, err = a.waitInLine(ctx)
		if lk != nil {
			a.returnBids(ctx)
		}
		a.withdrawOrphans(ctx, n.leave(channel, a.w, lk != nil))
		if hl := n.unclaimed(a.w); hl != nil {
			// Handed over as the wait ended: let it go.
			rctx, cancel := cleanupContext(ctx)
			_ = hl.Release(rctx)
			cancel()
		}
	}
	if a.o.Fair && lk == nil {
		a.leaveFair(ctx)
	}
	if lk == nil && len(a.bids.sent) > 0 {
		a.withdrawBids(ctx)
	}
	return lk, err
}

// waitInLine waits in the Locker's line for the key, trying Redis at each
// turn, until the lock is taken or handed over, or the wait ends.
func (a *acquisition) waitInLine(ctx context.Context) (*Lock, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if lk, err := a.waitTurn(ctx, timer); lk != nil || err != nil {
			return lk, err
		}
		a.liveAtTry, _ = a.l.notifier.live(a.w)
		if lk, err := a.try(ctx, &a.at); lk != nil || err != nil {
			return lk, err
		}
	}
}

// waitTurn sleeps until it is this waiter's turn to try Redis, and then
// returns neither a Lock nor an error. It returns the Lock when a holder
// of this Locker handed it over meanwhile, and the error that ends the
// wait when the wait ends.
func (a *acquisition) waitTurn(ctx context.Context, timer *time.Timer) (*Lock, error) {
	n, w := a.l.notifier, a.w
	for {
		if a.granted() {
			// Granted at release (wait_bid.go): the next attempt claims it.
			return nil, nil
		}
		if ctx.Err() != nil || !time.Now().Before(a.deadline) {
			return nil, a.failure(ctx)
		}
		first := a.o.Fair || n.isFirst(w)
		live, pending := n.live(w)
		if first && !live && !a.polling && a.l.cfg.observer != nil {
			a.observePolling(pending)
		}
		// A newcomer that queued without trying and finds itself first
		// (the waiters it saw are gone) tries at once, unless it took
		// over bids of theirs; so does one whose last attempt went out
		// before notices arrived, since a release in between would go
		// unnoticed.
		if first && (a.tries == 0 && !a.hasBids() || a.tries > 0 && live && !a.liveAtTry) {
			return nil, nil
		}
		timer.Reset(a.sleep(first, live)) // since Go 1.23, no stale tick can follow a Reset
		if !n.park(w) {
			return nil, ErrClosed
		}
		select {
		case <-w.wake:
		case <-pending: // the subscription's outcome: maybe notices arrive now
		case <-timer.C:
		case <-ctx.Done():
		}
		lk, requeue, resleep := n.unpark(w)
		if requeue {
			a.queued = false
		}
		if lk != nil {
			// Handed on within the Locker: the hand-off took the Locker's
			// bid out of Redis (handover.lua), so none of a's stands. An
			// attempt whose reply and clean-up were lost may still land,
			// held up in the network: it is buried, as when an attempt
			// serves a.
			a.buryUnburied(ctx)
			a.bids.reset()
			if lk, err := a.receive(ctx, lk); lk != nil || err != nil {
				return lk, err
			}
			return nil, nil
		}
		if a.granted() {
			return nil, nil
		}
		switch {
		case n.isClosed():
			return nil, ErrClosed
		case ctx.Err() != nil || !time.Now().Before(a.deadline):
			return nil, a.failure(ctx)
		case resleep:
			// Only when to look again changed (a grant elsewhere).
		case a.o.Fair || n.isFirst(w):
			return nil, nil // any wake-up of the first in line is its turn
		}
	}
}

// sleep is how long a waiter sleeps before it looks again, short of a
// wake-up: never past the wait budget, and for the first in line never
// past the holder's lease end, nor, with notices flowing, past recheck,
// nor, without them, past the moment o.Retry set for the next attempt.
func (a *acquisition) sleep(first, live bool) time.Duration {
	d := time.Until(a.deadline)
	if !first {
		return min(d, a.l.recheck)
	}
	if a.holderTTL > 0 {
		d = min(d, max(a.holderTTL-time.Since(a.seenAt), time.Millisecond))
	}
	if a.bidding() {
		// A bid placed bidLife ago is not granted: the waiter places it
		// again well before (lua/claim.lua), bidRefresh after its last
		// attempt however often it is woken in between.
		if a.rebidAt.IsZero() {
			a.rebidAt = time.Now().Add(bidRefresh)
		}
		d = min(d, max(time.Until(a.rebidAt), time.Millisecond))
		if e := a.l.notifier.grantEnds(a.w); e.After(time.Now()) {
			// Another Locker's waiter was granted the key: look again
			// when the grant ends, in case nobody claims it.
			d = min(d, time.Until(e)+time.Millisecond)
		}
	}
	if live {
		return min(d, a.l.recheck)
	}
	return min(d, max(time.Until(a.retryAt), 0))
}

// try makes one attempt: at nil for a single attempt, &a.at for one of a
// waiting Acquire (a parameter, not read from a, so that a single
// attempt's acquisition stays on the stack). It returns the Lock when
// taken, an error when the Acquire must end without it (the error Acquire
// returns), and neither when the caller may wait for a turn and try again.
func (a *acquisition) try(ctx context.Context, at *attempt) (*Lock, error) {
	a.tries++
	a.rebidAt = time.Time{}
	a.begin()
	if at != nil {
		a.prepare(at)
	}
	sent := time.Now()
	g, err := a.l.store.acquire(ctx, a.id, at)
	replied := time.Now()
	if err == nil && g.first > 0 && !replied.Before(sent.Add(a.o.TTL-a.l.cfg.margin(a.o.TTL))) {
		// The grant came back after its trusted lease had run out: by the
		// time the caller could use it, another owner may hold the key.
		err = errLateGrant
	}
	switch {
	case err == nil && g.first > 0:
		// The attempt named every bid a held: Redis took them over or
		// dropped them (acquire.lua). Those whose burial may not have
		// reached Redis are buried now.
		a.buryUnburied(ctx)
		a.bids.reset()
		lk := newLock(a.l, a.key, a.id, g.first, a.o, sent, replied)
		lk.fenceEnd = g.last
		a.startTurn(lk)
		if !a.l.watchdog.add(lk.lease) {
			a.l.cleanup(ctx, a.id)
			return nil, ErrClosed
		}
		return lk, nil
	case err == nil:
		a.answered++
		a.queued = (a.queued || at.queueTime() > 0) && !g.unqueued
		a.lastErr, a.holderTTL, a.seenAt, a.holder = nil, g.holderTTL, time.Now(), g.holder
		a.failed = 0
		if at != nil && at.bids {
			// A release may grant the bid before this reply comes: the
			// waiter looks for its notice before it sleeps (waitTurn).
			a.noteBid(sent, true, false, false)
		}
	default:
		a.lastErr = err
		if err == errLateGrant {
			a.queued = false // the grant took us off the queue
		}
		if unanswered(err) {
			if a.failed == 0 {
				a.failedAt = sent
			}
			a.failed++
		}
		if maybeSent(err) {
			// The attempt may have taken the lock before its reply was
			// lost: don't leave it blocking others for a whole lease.
			// Nor a copy of it that comes after the clean-up: a waiting
			// attempt's is buried.
			if at != nil && at.bids {
				buried := a.l.cleanupLost(ctx, a.id)
				a.noteBid(sent, false, true, !buried)
			} else {
				a.l.cleanup(ctx, a.id)
			}
			// It, or that clean-up, may yet run late, after a later
			// attempt took the lock: the next attempt's token is its own
			// (begin), so they find a stranger. A fair waiter keeps its
			// place, which is not a token; a grant took it off the queue,
			// so it asks to join again.
			a.queued = false
		}
	}
	if obs := a.l.cfg.observer; obs != nil {
		e := AcquireAttemptEvent{Key: a.key, Attempt: a.tries, Err: err}
		if err == nil {
			e.HolderTTL = g.holderTTL
		}
		obs.AcquireAttempt(ctx, e)
	}
	return nil, a.next(ctx)
}

// begin gives the attempt about to go its identity: the one Acquire made,
// if no attempt sent it yet, else a new one (see mintID). Every attempt
// goes through here, so none sends a token an earlier one sent, whatever
// became of that one (busy, refused on some Redlock nodes, lost, late).
func (a *acquisition) begin() {
	if a.id == nil || a.id.claimed {
		a.id = a.mintNext()
	}
}

// mintNext returns a new identity for a grant of a: an attempt's, or a
// bid that a release places for it (wait_bid.go).
func (a *acquisition) mintNext() *lockID {
	if a.mint != nil {
		return a.mint()
	}
	return mintID(a.l.keys, a.key, a.o)
}

// prepare fills in at for the next attempt of a waiting Acquire.
func (a *acquisition) prepare(at *attempt) {
	// A fair waiter asks to join the queue until Redis has answered that
	// it did (a busy reply); after a failed or late attempt it asks again,
	// and after Redis answered that it is not queued (a grant at release
	// took its entry out of the queue, and the grant ran out before the
	// waiter took it over: its notice lost, the waiter stalled for half a
	// lease): it queues again, last, as a waiter that missed its turn. Only
	// such attempts ask, so that a copy of an attempt that arrives after
	// the waiter was served queues nobody, unless it asked too.
	at.queueFor = 0
	at.bids = a.bidding()
	if a.o.Fair && !a.queued {
		at.queueFor = max(time.Until(a.deadline), time.Millisecond)
	}
	reserve := int64(1) // a fair hand-off takes its fence from the counter
	if !a.o.Fair {
		reserve = handoffBlock
	}
	at.setArgs(a.id, reserve, a.l.idArg)
	if at.bids {
		a.pullBids()
	}
	at.prev = a.bids.appendTokens(at.prev[:0])
}

// errLateGrant is the attempt error of a grant that arrived too late to use.
var errLateGrant = errors.New("the lock was granted, but the reply came after its lease (less the drift margin) had run out")

// startTurn begins this Locker's turn with lk, which a's attempt or bid
// just took from Redis (see notifier.startTurn).
func (a *acquisition) startTurn(lk *Lock) {
	if lk.fenceEnd > lk.fence {
		a.l.notifier.startTurn(a.id.lockKey(), a.w)
	}
}

// unanswered reports whether a failed attempt's error says that Redis
// could not be reached, as opposed to a slow answer, or on a Redlock
// Locker a vote split among waiters with enough nodes voting, or nodes
// too recently started to vote yet: the next attempt may settle those.
func unanswered(err error) bool {
	var q *QuorumError
	if errors.As(err, &q) {
		// Nodes that answered: for the lock, against it, or that they may
		// not vote yet (they will, at a time they named: worth waiting for).
		reached := 0
		for _, n := range q.Nodes {
			switch n.Outcome {
			case NodeAgreed, NodeBusy, NodeNotHeld, NodeRestarting:
				reached++
			}
		}
		return reached < q.Need
	}
	return err != errLateGrant
}

// next decides, after an attempt that did not get the lock, whether the
// Acquire may try again: it returns the error that ends it, or nil, having
// set when the retry strategy lets the next attempt go.
func (a *acquisition) next(ctx context.Context) error {
	if !a.mayRetry(ctx, a.o.Retry) {
		return a.failure(ctx)
	}
	return nil
}

// failure is the error of an Acquire that did not get the lock.
func (a *acquisition) failure(ctx context.Context) error { return a.notAcquired(ctx, a.key) }

// receive takes over the lock a holder of this Locker handed to this
// waiter while it slept (see wait_handoff.go). It returns the lock for Acquire
// to return; the error that ends the wait instead; or neither, and the
// waiter tries Redis: so when the lock was lost before the waiter woke.
func (a *acquisition) receive(ctx context.Context, lk *Lock) (*Lock, error) {
	if v := lk.ValidUntil(); v.IsZero() || !time.Now().Before(v) {
		// Lost between the hand-off and this wake-up, or about to be: no
		// lock to return. Let it go, in case Redis still has it, and try
		// Redis.
		rctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = lk.Release(rctx)
		// A fair hand-off took this waiter off the queue.
		a.queued = false
		return nil, nil
	}
	if ctx.Err() == nil {
		return lk, nil
	}
	// Handed the lock as the wait was called off: leave the line first, so
	// that the lock can be handed on to the next waiter, then let it go.
	// (wait leaves again, which is harmless.)
	a.withdrawOrphans(ctx, a.l.notifier.leave(a.id.lockKey(), a.w, true))
	rctx, cancel := cleanupContext(ctx)
	defer cancel()
	_ = lk.Release(rctx)
	return nil, a.failure(ctx)
}

// The acquisition's bids, in the order its wait meets them: each attempt
// asks whether it bids (bidding), through the line (bidsInLine), taking
// over first what waiters behind passed to the line (pullBids); a busy or
// lost reply records its bid (noteBid); a waiter that joins behind another
// passes its bids to the line (passBids); between attempts it looks for a
// grant to one of them (granted, hasBids). What it has sent is a bids
// value (wait_bid.go), and the line keeps its share (wait_line.go):
// neither calls back up here.

// bidding reports whether the attempts of a waits in Redis leave bids.
func (a *acquisition) bidding() bool { return a.l.bids && !a.pacing.deadline.IsZero() }

// bidsInLine reports whether a's bids go through its Locker's line: the
// bids hash holds one bid per Locker, so the line's first waiter takes
// over those of the waiters behind it, and a release bids for it. A fair
// waiter's bid is carried by its own entry in the queue
// (lua/queue_head.lua), and the queue decides whose turn it is: each fair
// waiter keeps its own.
func (a *acquisition) bidsInLine() bool { return a.bidding() && !a.o.Fair }

// pullBids takes over, when a is first in its Locker's line, the bids
// that waiters behind it passed to the line and that asked for the lease
// a asks for; it withdraws the others (Locker.withdraw), whose grant
// would give a a lease it did not ask for.
func (a *acquisition) pullBids() {
	if a.w == nil || !a.bidsInLine() {
		return
	}
	if other := a.l.notifier.takeLineBids(a.w, &a.bids, a.id.ttl, a.o.NoRenew); len(other) > 0 {
		a.l.withdraw(context.Background(), other)
	}
}

// noteBid records, after an attempt sent at sent that did not get the
// lock, whether it may have left a bid (bids.note), and tells a's line
// which tokens a grant to a may name.
func (a *acquisition) noteBid(sent time.Time, busy, maybe, unburied bool) {
	if a.bids.note(a.id, sent, a.o.NoRenew, busy, maybe, unburied) && a.w != nil {
		a.l.notifier.setBids(a.w, a.bids.tokens(), a.bids.standing())
	}
}

// passBids hands the bids of a, which has just joined its Locker's line
// behind another waiter, to the line, whose first waiter takes them over:
// only the first of a line tries Redis again, so only it can take over a
// grant whose notice was lost.
func (a *acquisition) passBids() {
	if a.bidsInLine() {
		a.l.notifier.passBids(a.w, &a.bids)
	}
}

// granted reports, and forgets, a grant at release that a notice
// announced for one of a's bids, between attempts: a's next attempt,
// which names every bid of a, claims it in Redis (lua/acquire.lua), and
// its reply, not the notice, is the evidence that a holds the lock.
func (a *acquisition) granted() bool {
	if !a.l.notifier.heardGrant.Load() {
		// None heard: a notice that comes later wakes the waiter, which
		// looks again before it sleeps (waitTurn).
		return false
	}
	a.pullBids()
	return len(a.bids.sent) > 0 && a.l.notifier.takeGrant(a.id.lockKey(), a.bids.sent)
}

// hasBids reports whether a has bids, once it took over those passed to
// its line, or a release on its way may place one for it (nextBid). The
// release is looked for first: once it has told what it placed
// (bidPlaced), its bid is in the line.
func (a *acquisition) hasBids() bool {
	if a.w != nil && a.l.notifier.bidComing(a.w) {
		return true
	}
	a.pullBids()
	return len(a.bids.sent) > 0
}

// Leaving, as the wait ends (wait, receive): with the lock, a waiter
// passes its bids on to the line, or withdraws them when alone in it;
// without it, it withdraws them and leaves the fair queue; and the last
// to leave a line withdraws the bids left in it.

// returnBids passes the bids a still holds to its Locker's line as a
// leaves it with the lock: the next first waiter takes them over. With
// nobody else in line, or for a fair waiter, a withdraws them instead.
func (a *acquisition) returnBids(ctx context.Context) {
	if a.w == nil || len(a.bids.sent) == 0 {
		return
	}
	if !a.bidsInLine() || !a.l.notifier.leaveBids(a.w, &a.bids) {
		a.withdrawBids(ctx)
	}
}

// withdrawOrphans withdraws the bids that waiters passed to a Locker's
// line when the last waiter left it (notifier.leave): nobody is left to
// claim what a release would grant them.
func (a *acquisition) withdrawOrphans(ctx context.Context, orphans []bidSent) {
	if len(orphans) > 0 {
		a.l.withdraw(ctx, orphans)
	}
}

// withdrawBids, as a waiting Acquire ends without the lock, takes its
// bids out of Redis, and lets go of the key if one was granted meanwhile
// (release.lua withdraws the releasing Locker's bid for the token first).
// As a wait ends, the withdrawal goes on behind the Acquire's answer, so
// that an Acquire whose wait ends while Redis hangs still answers when its
// wait ends; the Locker's Close waits for it. All the releases share one
// cleanupTimeout.
func (a *acquisition) withdrawBids(ctx context.Context) {
	sent := slices.Clone(a.bids.sent)
	a.bids.reset()
	a.l.withdraw(ctx, sent)
}

// leaveFair takes a fair waiter that ends without the lock out of its
// key's queue (any attempt may have queued it), and withdraws its bids
// after that, so that a grant to one of them made before the leave is let
// go. When one of its bids may be unburied (a lost attempt whose clean-up
// got no answer), it is buried first (leaveAfterBurial). Otherwise the
// waiter leaves at once (Locker.leaveQueue) and its bids are withdrawn
// behind it.
func (a *acquisition) leaveFair(ctx context.Context) {
	lost := a.bids.unburied()
	if len(lost) == 0 {
		a.l.leaveQueue(ctx, a.id, a.at.place)
		return
	}
	sent := slices.Clone(a.bids.sent)
	a.bids.reset()
	a.leaveAfterBurial(ctx, lost, sent)
}

// leaveAfterBurial takes a fair waiter that no longer waits (it gave up,
// or holds the key) out of its key's queue, behind the caller: it buries
// lost, the attempts whose clean-up may never have reached Redis, then
// leaves the queue, then withdraws rest. A copy of a lost attempt that
// asked to join and landed before its burial queued the place again, with
// its bid, which a release would grant to nobody: only a leave after the
// burial takes that entry out (a copy that lands after the burial is
// refused), and only a withdrawal after the leave lets go of a grant a
// release made to the entry meanwhile.
func (a *acquisition) leaveAfterBurial(ctx context.Context, lost, rest []bidSent) {
	l, id, place := a.l, a.id, a.at.place
	sends := l.withdrawals(lost)
	sends = append(sends, func(ctx context.Context) error { return l.store.leaveQueue(ctx, id, place) })
	l.cleanUpBehind(ctx, append(sends, l.withdrawals(rest)...)...)
}

// leaveQueue takes a waiter queued as place out of the queue of id's key:
// sent at once, and sent again behind the caller until Redis answers
// (Locker.answeredBehind). A leave that never reached Redis leaves the
// waiter first in line until its bid grows stale (lua/claim.lua), or,
// without a bid, until its deadline.
func (l *Locker) leaveQueue(ctx context.Context, id *lockID, place string) {
	l.answeredBehind(ctx, func(ctx context.Context) error {
		return l.store.leaveQueue(ctx, id, place)
	})
}
