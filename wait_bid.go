package padlock

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Grant at release: how a lock goes from one Locker to a waiter of
// another in the one round trip of the release, with no attempt of the
// waiter's own (lua/bids.lua has the server's half).
//
// The first waiter of a Locker for a key tries Redis; an attempt that
// finds the key held leaves a bid: its own grant token, lease and fences
// to reserve, under the Locker's id. When the holder releases, the release
// script grants the key to the bid of the Locker next in turn: it sets the
// key to the bid's token, reserves its fences and publishes "g<first>
// <last> <token>". The waiter's notifier records the grant and wakes it;
// the waiter takes the lock as if its attempt had returned it, and trusts
// the lease from the moment that attempt was sent, which is before Redis
// set it. Lockers take turns: a Locker that heard another Locker's waiter
// ask (a "want" notice, wait_handoff.go) serves the waiters it had when
// its turn began, then gives the key back to Redis, and so to that waiter,
// before it hands the key to a waiter of its own again.
//
// Every grant made so is its own: the bid's token was minted for one
// attempt and sent once, a bid is granted once, and each later attempt of
// the waiter replaces it. A waiter takes a grant from a notice only for
// the token of its attempt that Redis last answered busy (its standing
// bid), and only between attempts: while one is on its way, that attempt
// (which names the tokens of the earlier ones, acquire.lua) takes over a
// grant it finds instead. Nothing is taken from a notice after an attempt
// whose reply was lost: its clean-up, sent after it, may run later and give
// its grant away, and it may have taken over the grants it named; only the
// next attempt may take those over, in Redis. So a late
// or repeated notice names a token nobody waits on and changes nothing,
// and a lost one is made good by the waiter's next attempt, at the latest
// when its timer fires. A waiter that gives up withdraws its
// bid, and lets go of the key if the bid was granted meanwhile.
//
// Grants at release are made on one deployment (a node, Sentinel or
// Cluster; on Cluster the notice stays on the key's shard). Not on a
// Redlock Locker, where a grant would need a majority of independent nodes
// to agree at once, nor with Config.ReplicaAcks, whose grants must wait for
// replicas: those wake the waiter to try, as before.
//
// In fair mode the queue in Redis decides: a fair waiter's entry in the
// queue carries its bid (lua/queue_head.lua), which its every attempt
// replaces, and a release grants the key to the bid of the oldest live
// waiter, wherever it waits, unless that waiter is the next in the
// releasing Locker's line (a hand-off within the Locker, wait_handoff.go).
// The waiter takes the grant from its notice as above; each fair waiter
// is first in line for itself, so it passes no bids to its line.

// maxBidTokens bounds the tokens of a waiter's own attempts whose replies
// were lost in a row: a waiting Acquire gives up after two of them (or a
// second of them), so the bound is never met in practice.
const maxBidTokens = 16

// A Locker has one bid per key in Redis, but several of its waiters may
// try at once before its line forms, each of their attempts replacing the
// Locker's bid. The line holds them all, however many: a waiter that joins
// behind the first passes its bids to the line (passBids), and the first
// takes them over (pullBids), as its own: a grant to any of them is its
// to take, and its next attempt names them all, after which (busy) none
// but its own stands. None is dropped on the way: the one dropped might
// be the one Redis grants.

// bidSent is one of a waiter's attempts that may have left a bid.
type bidSent struct {
	id   *lockID
	sent time.Time
	// busy: Redis answered it busy, so it left the waiter's one standing
	// bid, and no attempt sent since names it. A notice of its grant may
	// be taken. An attempt whose reply was lost had its clean-up sent
	// after it, which may run later and give its grant away, and it may
	// itself have taken over the grants of the attempts it named: only
	// the waiter's next attempt may take those over, in Redis.
	busy bool
	// noRenew: Options.NoRenew of the Acquire that sent it. A waiter
	// takes over only bids that asked for the lease it asks for
	// (pullBids), as a hand-off within a Locker goes only to such a
	// waiter.
	noRenew bool
	// answered is when Redis answered it busy; byRelease: a release of
	// the Locker placed it (releaseBid), replacing in Redis whatever bid
	// the Locker had.
	answered  time.Time
	byRelease bool
}

// bidGrant is a grant at release that a notice announced.
type bidGrant struct {
	token       string
	first, last int64
}

// maxGrants bounds keyWaiters.grants: a grant is for the first waiter of
// one Locker, which looks for it as soon as its attempt returns.
const maxGrants = 8

// parseGrant reads a grant notice, "g<first> <last> <token>".
func parseGrant(msg string) (bidGrant, bool) {
	rest, ok := strings.CutPrefix(msg, "g")
	if !ok {
		return bidGrant{}, false
	}
	f, rest, ok1 := strings.Cut(rest, " ")
	l, token, ok2 := strings.Cut(rest, " ")
	first, err1 := strconv.ParseInt(f, 10, 64)
	last, err2 := strconv.ParseInt(l, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || token == "" || first <= 0 || last < first {
		return bidGrant{}, false
	}
	return bidGrant{token: token, first: first, last: last}, true
}

// granted records a grant notice for the waiters of kw, and wakes the
// waiter whose bid it names, if it is in line. n.mu is held.
func (kw *keyWaiters) granted(g bidGrant) {
	if len(kw.grants) == maxGrants {
		kw.grants = append(kw.grants[:0], kw.grants[1:]...)
	}
	kw.grants = append(kw.grants, g)
	for _, w := range kw.waiters {
		if w.a != nil && slices.Contains(w.bids, g.token) {
			w.signal()
			return
		}
	}
	if slices.ContainsFunc(kw.lineBids, func(b bidSent) bool { return b.id.token == g.token }) {
		// Passed to the line: the first waiter takes it over.
		for _, w := range kw.waiters {
			if w.a != nil && !w.a.o.Fair {
				w.signal()
				return
			}
		}
	}
	// A grant for another Locker's waiter: the key stays held. A first
	// waiter here that has no bid in Redis asks now, so that the key comes
	// back to this Locker in its turn, unless the release that made the
	// grant bids for it.
	for _, w := range kw.waiters {
		if w.a != nil && !w.a.o.Fair {
			if len(w.bids) == 0 && !kw.bidComing && !slices.ContainsFunc(kw.lineBids, func(b bidSent) bool { return b.busy }) {
				w.signal()
			}
			return
		}
	}
}

// A Locker that releases a key to another Locker's waiter (they take
// turns, wait_handoff.go) while waiters of its own wait bids for them in
// the same script (lua/release.lua): a bid under a token minted for its
// first waiter's next attempt, which that attempt would otherwise place
// a round trip later. The bid goes to the line (lineBids) as a bid of a
// waiter behind would: the first waiter takes it over, trusting its lease
// from when the release was sent. A release whose reply was lost may
// have placed it: the waiter's next attempt names it then, as it names an
// attempt of its own whose reply was lost. A bid that nobody is left to
// wait for is withdrawn.

// releaseBid is the bid a release places for its Locker's first waiter.
type releaseBid struct {
	id      *lockID
	noRenew bool
	sent    time.Time // as the release was sent
	placed  bool      // the release said it placed it
	maybe   bool      // the release's reply was lost: it may have
}

// nextBid returns the bid for kw's first waiter that a release granting
// the key to another Locker's waiter places, or nil when that waiter does
// not bid. n.mu is held.
func (kw *keyWaiters) nextBid() *releaseBid {
	if len(kw.waiters) == 0 {
		return nil
	}
	a := kw.waiters[0].a
	if a == nil || !a.bidsInLine() {
		return nil
	}
	kw.bidComing = true
	return &releaseBid{id: a.mintNext(), noRenew: a.o.NoRenew}
}

// bidPlaced records what became of the bid b that the release of a lock
// on channel carried.
func (l *Locker) bidPlaced(channel string, b *releaseBid) {
	n := l.notifier
	n.mu.Lock()
	kw := n.keys[channel]
	if kw != nil {
		kw.bidComing = false
	}
	if !b.placed && !b.maybe {
		n.mu.Unlock()
		return
	}
	if kw != nil && len(kw.waiters) > 0 {
		kw.lineBids = append(kw.lineBids, bidSent{id: b.id, sent: b.sent, busy: b.placed, noRenew: b.noRenew, byRelease: true})
		// Its grant may have been told already.
		if slices.ContainsFunc(kw.grants, func(g bidGrant) bool { return g.token == b.id.token }) {
			kw.waiters[0].signal()
		}
		n.mu.Unlock()
		return
	}
	n.mu.Unlock()
	o := &acquisition{l: l, bidsSent: []bidSent{{id: b.id, sent: b.sent}}}
	o.withdrawBids(context.Background())
}

// takeGrant returns, and forgets, a recorded grant for the token of one
// of bids that Redis answered busy (bidTokens).
func (n *notifier) takeGrant(channel string, bids []bidSent) (bidGrant, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := n.keys[channel]
	if kw == nil {
		return bidGrant{}, false
	}
	for i, g := range kw.grants {
		if slices.ContainsFunc(bids, func(b bidSent) bool { return b.busy && b.id.token == g.token }) {
			kw.grants = append(kw.grants[:i], kw.grants[i+1:]...)
			return g, true
		}
	}
	return bidGrant{}, false
}

// setBids tells the notifier which tokens w's bids may name, so that a
// grant notice for one of them wakes it.
func (n *notifier) setBids(w *waiter, tokens []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w.bids = append(w.bids[:0], tokens...)
}

// passBids hands the bids of a, which has just joined its Locker's line
// behind another waiter, to the line, whose first waiter takes them over:
// only the first of a line tries Redis again, so only it can take over a
// grant whose notice was lost.
func (a *acquisition) passBids() {
	n := a.l.notifier
	n.mu.Lock()
	defer n.mu.Unlock()
	w := a.w
	if !a.bidsInLine() || len(w.kw.waiters) == 0 || w.kw.waiters[0] == w {
		return
	}
	w.kw.lineBids = append(w.kw.lineBids, a.bidsSent...)
	a.bidsSent = a.bidsSent[:0]
	w.bids = w.bids[:0]
}

// returnBids passes the bids a still holds to its Locker's line as a
// leaves it with the lock: the next first waiter takes them over. With
// nobody else in line, or for a fair waiter, a withdraws them instead.
func (a *acquisition) returnBids(ctx context.Context) {
	if a.w == nil || len(a.bidsSent) == 0 {
		return
	}
	if !a.bidsInLine() || !a.passToLine() {
		a.withdrawBids(ctx)
	}
}

// passToLine hands a's bids to its line, unless a is alone in it.
func (a *acquisition) passToLine() bool {
	n := a.l.notifier
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := a.w.kw
	if len(kw.waiters) < 2 || !slices.Contains(kw.waiters, a.w) {
		return false
	}
	kw.lineBids = append(kw.lineBids, a.bidsSent...)
	a.bidsSent = a.bidsSent[:0]
	a.w.bids = a.w.bids[:0]
	return true
}

// pullBids takes over, when a is first in its Locker's line, the bids
// that waiters behind it passed to the line and that asked for the lease
// a asks for; it withdraws the others (withdrawBids), whose grant would
// give a a lease it did not ask for.
func (a *acquisition) pullBids() {
	if a.w == nil || !a.bidsInLine() {
		return
	}
	other := a.takeLineBids()
	if len(other) > 0 {
		o := &acquisition{l: a.l, bidsSent: other}
		o.withdrawBids(context.Background())
	}
}

// takeLineBids moves the line's bids that asked for a's lease into a's,
// and returns the others, taken out of the line.
func (a *acquisition) takeLineBids() (other []bidSent) {
	n := a.l.notifier
	n.mu.Lock()
	defer n.mu.Unlock()
	kw := a.w.kw
	if len(kw.lineBids) == 0 || len(kw.waiters) == 0 || kw.waiters[0] != a.w {
		return nil
	}
	for _, b := range kw.lineBids {
		if b.byRelease && b.busy {
			// It replaced the bids Redis had answered before its release
			// was sent: those can never be granted now.
			a.bidsSent = slices.DeleteFunc(a.bidsSent, func(o bidSent) bool {
				return o.busy && !o.answered.IsZero() && o.answered.Before(b.sent)
			})
		}
		if b.id.ttl == a.id.ttl && b.noRenew == a.o.NoRenew {
			a.bidsSent = append(a.bidsSent, b)
		} else {
			other = append(other, b)
		}
	}
	kw.lineBids = kw.lineBids[:0]
	a.w.bids = append(a.w.bids[:0], a.bidTokens()...)
	return other
}

// bidding reports whether the attempts of a waits in Redis leave bids.
func (a *acquisition) bidding() bool { return a.l.bids && !a.pacing.deadline.IsZero() }

// bidsInLine reports whether a's bids go through its Locker's line: the
// bids hash holds one bid per Locker, so the line's first waiter takes
// over those of the waiters behind it, and a release bids for it. A fair
// waiter's bid is carried by its own entry in the queue
// (lua/queue_head.lua), and the queue decides whose turn it is: each fair
// waiter keeps its own.
func (a *acquisition) bidsInLine() bool { return a.bidding() && !a.o.Fair }

// bidTokens returns the tokens whose grants a may take from a notice:
// that of its standing bid, if Redis confirmed it.
func (a *acquisition) bidTokens() []string {
	var t []string
	for _, b := range a.bidsSent {
		if b.busy {
			t = append(t, b.id.token)
		}
	}
	return t
}

// noteBid records, after an attempt sent at sent that did not get the
// lock, whether it may have left a bid: it did if Redis answered busy
// (which also replaced every earlier bid of a), it may have if its reply
// was lost.
func (a *acquisition) noteBid(sent time.Time, busy, maybe bool) {
	switch {
	case busy:
		a.bidsSent = append(a.bidsSent[:0], bidSent{id: a.id, sent: sent, busy: true, noRenew: a.o.NoRenew, answered: time.Now()})
	case maybe:
		// It named the earlier tokens, and may have taken over a grant to
		// one of them (acquire.lua): none of those may be taken from a
		// notice any more.
		for i := range a.bidsSent {
			a.bidsSent[i].busy = false
		}
		if len(a.bidsSent) == maxBidTokens {
			a.bidsSent = append(a.bidsSent[:0], a.bidsSent[1:]...)
		}
		a.bidsSent = append(a.bidsSent, bidSent{id: a.id, sent: sent, noRenew: a.o.NoRenew})
	default:
		return
	}
	if a.w != nil {
		a.l.notifier.setBids(a.w, a.bidTokens())
	}
}

// claimGrant looks for a grant at release of one of a's bids, between
// attempts, and takes it: it returns the Lock, or nil when there was none
// or it came too late to use (then it is let go, and the waiter goes on).
func (a *acquisition) claimGrant(ctx context.Context) *Lock {
	if !a.l.notifier.granted.Load() {
		// None heard: a notice that comes later wakes the waiter, which
		// looks again before it sleeps (waitTurn).
		return nil
	}
	a.pullBids()
	if !slices.ContainsFunc(a.bidsSent, func(b bidSent) bool { return b.busy }) {
		return nil
	}
	g, ok := a.l.notifier.takeGrant(a.id.lockKey(), a.bidsSent)
	if !ok {
		return nil
	}
	i := slices.IndexFunc(a.bidsSent, func(b bidSent) bool { return b.id.token == g.token })
	b := a.bidsSent[i]
	// Spent. The others may still stand (one taken over from a waiter
	// behind may have been placed after this one was granted): as a
	// leaves the line, it passes them on (returnBids).
	a.bidsSent = slices.Delete(a.bidsSent, i, i+1)
	if a.w != nil {
		a.l.notifier.setBids(a.w, a.bidTokens())
	}
	// The lease Redis set is the bid's: a bid taken over from a waiter
	// behind may have asked for another than a's.
	o := a.o
	o.TTL = b.id.ttl
	now := time.Now()
	if !now.Before(b.sent.Add(o.TTL - a.l.cfg.margin(o.TTL))) {
		// Its lease, trusted from the attempt that bid, has run out: by
		// now another owner may hold the key. Let it go. (A fair grant
		// took the waiter off the queue: it asks to join again.)
		a.l.cleanup(ctx, b.id)
		a.queued = false
		return nil
	}
	lk := newLock(a.l, a.key, b.id, g.first, o, b.sent, now)
	lk.fenceEnd = g.last
	a.startTurn(lk)
	if !a.l.watchdog.add(lk.lease) {
		a.l.cleanup(ctx, b.id)
		return nil
	}
	return lk
}

// withdrawBids, as a waiting Acquire ends without the lock, takes its
// bids out of Redis, and lets go of the key if one was granted meanwhile
// (release.lua withdraws the releasing Locker's bid for the token first).
// As a wait ends, the withdrawal goes on behind the Acquire's answer, so
// that an Acquire whose wait ends while Redis hangs still answers when its
// wait ends; the Locker's Close waits for it. All the releases share one
// cleanupTimeout.
func (a *acquisition) withdrawBids(ctx context.Context) {
	ids := make([]*lockID, len(a.bidsSent))
	for i, b := range a.bidsSent {
		ids[i] = b.id
	}
	a.bidsSent = a.bidsSent[:0]
	ctx = context.WithoutCancel(ctx)
	withdraw := func() {
		ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
		defer cancel()
		for _, id := range ids {
			if _, err := a.l.store.release(ctx, id, giveBack{notify: true, withdraw: true}); err != nil && ctx.Err() != nil {
				return
			}
		}
	}
	if !a.l.notifier.goBehind(withdraw) {
		withdraw()
	}
}
