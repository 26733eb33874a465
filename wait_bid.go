package padlock

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Grant at release: how a lock goes from one Locker to a waiter of
// another in the round trip of the release (lua/bids.lua has the server's
// half; wait_claim.go says why a grant is an offer the waiter claims).
//
// The first waiter of a Locker for a key tries Redis; an attempt that
// finds the key held leaves a bid: its own grant token and lease, under
// the Locker's id. When the holder releases, the release script grants
// the key to the bid of the Locker next in turn: it sets the key to the
// bid's token for the claim window and publishes "g<ms> <token>". The
// waiter's notifier records the grant and wakes it, and its next attempt,
// which names the tokens of all its bids, claims the grant in Redis
// (acquire.lua) with a grant of its own: the lock is what that attempt's
// reply says. Lockers take turns: a Locker that heard another Locker's
// waiter ask (a "want" notice, wait_handoff.go) serves the waiters it had
// when its turn began, then gives the key back to Redis, and so to that
// waiter, before it hands the key to a waiter of its own again.
//
// A late or repeated notice, or one that anyone else published, only
// wakes a waiter to try: the attempt finds no grant to one of its tokens,
// and is answered as any other. A lost one is made good by the waiter's
// next look (at once when its subscription is made again after the
// connection dropped, else within a second), or the grant ends within
// the claim window. A waiter that gives up withdraws its bids, and lets
// go of the key if one was granted meanwhile.
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
// The waiter claims the grant as above; each fair waiter is first in line
// for itself, so it passes no bids to its line.

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
	// bid (waiter.standing), and no attempt sent since names it.
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
	// unburied: its reply was lost and so was its clean-up's
	// (Locker.cleanupLost), which may never have reached Redis: a copy of
	// it held up in the network may still land, take the key or bid. Its
	// withdrawal, and the claim that serves its waiter, bury it again.
	unburied bool
}

// bids are the attempts of one waiting Acquire that may have left a bid,
// oldest first: a grant to any of them is the waiter's to claim. Only the
// waiter's own goroutine touches them: its acquisition, and the calls to
// the line it makes (under notifier.mu) as they pass to the line and from
// it.
type bids struct {
	sent []bidSent
}

// reset forgets every bid: Redis took them over or dropped them, or they
// passed to the line.
func (b *bids) reset() { b.sent = b.sent[:0] }

// note records, after an attempt of id, sent at sent, that did not get
// the lock, whether it may have left a bid: it did if Redis answered busy
// (which also replaced the bid Redis had confirmed before), it may have
// if its reply was lost. It reports whether b changed. An attempt whose
// reply was lost stays named for the rest of the wait, busy answers or
// not: a copy of it may still reach Redis and place its bid after a
// later one, and the release would grant that.
func (b *bids) note(id *lockID, sent time.Time, noRenew, busy, maybe, unburied bool) bool {
	switch {
	case busy:
		b.sent = slices.DeleteFunc(b.sent, func(s bidSent) bool { return s.busy })
		b.add(bidSent{id: id, sent: sent, busy: true, noRenew: noRenew, answered: time.Now()})
	case maybe:
		// It may have replaced the standing bid: none is confirmed now.
		for i := range b.sent {
			b.sent[i].busy = false
		}
		b.add(bidSent{id: id, sent: sent, noRenew: noRenew, unburied: unburied})
	default:
		return false
	}
	return true
}

// add adds s to b, the oldest bid dropped at maxBidTokens.
func (b *bids) add(s bidSent) {
	if len(b.sent) == maxBidTokens {
		b.sent = append(b.sent[:0], b.sent[1:]...)
	}
	b.sent = append(b.sent, s)
}

// takeOver adds to b the bids of line that asked for the lease ttl and
// renewal noRenew, and returns the others, whose grant would give the
// waiter a lease it did not ask for.
func (b *bids) takeOver(line []bidSent, ttl time.Duration, noRenew bool) (other []bidSent) {
	for _, s := range line {
		if s.byRelease && s.busy {
			// It replaced the bids Redis had answered before its release
			// was sent: those can never be granted now.
			b.sent = slices.DeleteFunc(b.sent, func(o bidSent) bool {
				return o.busy && !o.answered.IsZero() && o.answered.Before(s.sent)
			})
		}
		if s.id.ttl == ttl && s.noRenew == noRenew {
			b.sent = append(b.sent, s)
		} else {
			other = append(other, s)
		}
	}
	return other
}

// tokens returns the tokens of b: a grant notice that names one wakes the
// waiter, whose next attempt names them all and so claims it.
func (b *bids) tokens() []string {
	t := make([]string, len(b.sent))
	for i, s := range b.sent {
		t[i] = s.id.token
	}
	return t
}

// unburied returns the attempts of b whose clean-up after a lost reply
// may never have reached Redis: a copy of one held up in the network may
// still land, and must find it buried.
func (b *bids) unburied() []bidSent {
	var lost []bidSent
	for _, s := range b.sent {
		if s.unburied {
			lost = append(lost, s)
		}
	}
	return lost
}

// appendTokens appends the tokens of b to t: those an attempt names.
func (b *bids) appendTokens(t []string) []string {
	for _, s := range b.sent {
		t = append(t, s.id.token)
	}
	return t
}

// standing reports whether Redis confirmed that one of b stands.
func (b *bids) standing() bool {
	return slices.ContainsFunc(b.sent, func(s bidSent) bool { return s.busy })
}

// parseGrant reads a grant notice, "g<ms> <token>": the token granted,
// and for how long the grant holds the key unless its waiter claims it.
func parseGrant(msg string) (token string, hold time.Duration, ok bool) {
	rest, ok := strings.CutPrefix(msg, "g")
	if !ok {
		return "", 0, false
	}
	ms, token, ok := strings.Cut(rest, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || token == "" || n < 0 {
		return "", 0, false
	}
	return token, time.Duration(n) * time.Millisecond, true
}

// A Locker that releases a key to another Locker's waiter (they take
// turns, wait_handoff.go) while waiters of its own wait bids for them in
// the same script (lua/release.lua): a bid under a token minted for its
// first waiter's next attempt, which that attempt would otherwise place
// a round trip later. The bid goes to the line (lineBids) as a bid of a
// waiter behind would: the first waiter takes it over, trusting its lease
// from when the release was sent. A release whose reply was lost may
// have placed it: the waiter's next attempt names it then, as it names an
// attempt of its own whose reply was lost, and it is unburied: its
// withdrawal buries it, so that the release, if it was held up in the
// network and lands after, places no bid for waiters who are gone (nor
// once the waiter that took it over is served). A bid that nobody is
// left to wait for is withdrawn.

// releaseBid is the bid a release places for its Locker's first waiter.
type releaseBid struct {
	id      *lockID
	noRenew bool
	sent    time.Time // as the release was sent
	placed  bool      // the release said it placed it
	maybe   bool      // the release's reply was lost: it may have
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
		kw.lineBids = append(kw.lineBids, bidSent{id: b.id, sent: b.sent, busy: b.placed, noRenew: b.noRenew, byRelease: true, unburied: b.maybe})
		// Its grant may have been told already.
		if slices.Contains(kw.grants, b.id.token) {
			kw.waiters[0].signal()
		}
		n.mu.Unlock()
		return
	}
	n.mu.Unlock()
	l.withdraw(context.Background(), []bidSent{{id: b.id, unburied: b.maybe}})
}

// withdraw takes the bids sent out of Redis, and lets go of the key
// where one was granted meanwhile, behind the caller (the Locker's Close
// waits for it), with one cleanupTimeout for them all, each sent again
// until Redis answers it (untilAnswered); a closed Locker sends each once,
// in the caller. An unburied one is buried as it goes (lua/claim.lua): a
// copy of it that lands after the withdrawal takes nothing.
func (l *Locker) withdraw(ctx context.Context, sent []bidSent) {
	l.cleanUpBehind(ctx, l.withdrawals(sent)...)
}

// withdrawals returns the sends that take the bids sent out of Redis
// (withdraw), in order.
func (l *Locker) withdrawals(sent []bidSent) []func(context.Context) error {
	sends := make([]func(context.Context) error, 0, len(sent))
	for _, s := range sent {
		sends = append(sends, func(ctx context.Context) error {
			_, err := l.store.release(ctx, s.id, giveBack{notify: true, withdraw: true, bury: s.unburied})
			return err
		})
	}
	return sends
}

// cleanUpBehind sends the clean-ups sends one after another, behind the
// caller (the Locker's Close waits for them), each once the one before it
// was answered, each sent again until Redis answers it (untilAnswered),
// with one cleanupTimeout for them all; a closed Locker sends each once,
// in the caller.
func (l *Locker) cleanUpBehind(ctx context.Context, sends ...func(context.Context) error) {
	ctx = context.WithoutCancel(ctx)
	run := func(again bool) {
		ctx, cancel := cleanupContext(ctx)
		defer cancel()
		for _, send := range sends {
			if again {
				untilAnswered(ctx, func() error { return send(ctx) })
			} else {
				_ = send(ctx)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
	if !l.notifier.goBehind(func() { run(true) }) {
		run(false)
	}
}

// buryUnburied buries, behind the caller, the attempts among a's bids
// whose clean-up after a lost reply may never have reached Redis, once a
// holds the key: a copy of one that lands later takes nothing. A fair
// waiter's place leaves the queue after them: a copy of an attempt that
// asked to join and landed before its burial queued the place again,
// with its bid, which a release would grant to nobody.
func (a *acquisition) buryUnburied(ctx context.Context) {
	lost := a.bids.unburied()
	switch {
	case len(lost) == 0:
	case a.o.Fair:
		a.leaveAfterBurial(ctx, lost, lost)
	default:
		a.l.withdraw(ctx, lost)
	}
}
