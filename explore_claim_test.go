package padlock_test

import (
	"strings"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
)

// The claimed invariant: a grant at release goes to a waiter that is
// there ("Nobody holds for nobody", docs/locks.md; wait_claim.go). The
// idle invariant bounds what a grant to nobody costs (a claim window);
// this one says when there may be such a grant at all. In the fleet runs
// every grant notice (g<ms> <token>) is checked
// claimSlack after the first Locker heard it: the key must no longer hold
// the grant, for its waiter has claimed it (its next attempt names the
// token) or let it go (a waiter that gives up withdraws its bids, and the
// last to leave a Locker's line those passed to the line). Excused: a
// grant to the killed Locker's bid placed before it was killed, whose
// bid stands until bidLife has passed (a grant to it later is itself the
// failure: a stale bid granted); a grant whose notice the grantee's
// Locker lost (it looks again within a recheck); a Locker closed; a
// fault on the grantee's commands in reach (explore_fleetfault_test.go);
// a server paused or restarted in between.
const invClaimed = "claimed"

// claimSlack is how long the grantee's Locker may take, on the virtual
// clock, to claim a grant or let it go once it heard the notice: a few
// round trips of at most 1 ms each.
const claimSlack = 50 * time.Millisecond

// grantsSeen is what the invariant has seen of the grant notices.
type grantsSeen struct {
	mu   sync.Mutex
	seen map[string]bool         // by token: a check is on its way
	lost map[string]map[int]bool // by token: the Lockers that lost its notice
	// lostAt: when a live Locker lost a grant notice (the idle
	// invariant's excuse).
	lostAt []time.Duration
	// to: when a grant to a bid of each Locker was first heard of, by
	// the Locker whose attempt placed it (a turn of that Locker's, the
	// turn-bound invariant's; an AcquireAll's among them, which the ops
	// do not show).
	to map[int][]time.Duration
}

// sawNotice is told every notice Locker li's notifier received in a fleet
// run, and whether the fault layer lost it for li.
func (w *world) sawNotice(li int, channel, payload string, lost bool) {
	token, ok := grantToken(payload)
	if !ok {
		return
	}
	g := &w.grants
	g.mu.Lock()
	if g.lost == nil {
		g.seen, g.lost = map[string]bool{}, map[string]map[int]bool{}
	}
	if lost {
		if g.lost[token] == nil {
			g.lost[token] = map[int]bool{}
		}
		g.lost[token][li] = true
		if !w.killedNow(li) {
			g.lostAt = append(g.lostAt, w.chk.now())
		}
	}
	first := !g.seen[token]
	g.seen[token] = true
	g.mu.Unlock()
	if !first {
		return
	}
	at := w.chk.now()
	owner := w.ownerOf(token)
	g.mu.Lock()
	if g.to == nil {
		g.to = map[int][]time.Duration{}
	}
	g.to[owner] = append(g.to[owner], at)
	g.mu.Unlock()
	// A command the killed Locker sent before it died may still run late,
	// after a pause, and place a bid then.
	start := w.tr.Start()
	late := time.Duration(0)
	if w.fleetFaults {
		late = maxInFlight // a command delayed before the kill runs after it
	}
	if owner == w.doomed && w.killedAt() >= 0 && at > w.killedAt()+late+padlock.BidLife+claimSlack &&
		!w.pausedIn(start.Add(w.killedAt()-maxInFlight), start.Add(at)) && !w.chk.restartIn(w.killedAt()-maxInFlight, at) {
		w.chk.fail(invClaimed, at, "%s: a release granted the key to %s, the bid of L%d, which was killed at %.3fs: a bid placed %v ago or more was granted",
			channel, token, owner, w.killedAt().Seconds(), padlock.BidLife)
		return
	}
	w.late.Go(func() {
		time.Sleep(claimSlack)
		w.checkClaimed(channel, token, owner, at)
	})
}

// grantToken returns the token a grant notice names.
func grantToken(payload string) (string, bool) {
	if !strings.HasPrefix(payload, "g") {
		return "", false
	}
	_, token, ok := strings.Cut(payload, " ")
	return token, ok && token != ""
}

// ownerOf returns the Locker whose client sent token as an attempt's
// (fleet runs: client i is Locker i's, on the Cluster its node clients
// 8i+j), or -1.
func (w *world) ownerOf(token string) int {
	t := w.tokens
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.client[token]; ok {
		if w.cluster != nil {
			return id / 8 // Locker i's node clients are 8i+j (newClusterLocker)
		}
		return id
	}
	return -1
}

// checkClaimed checks, claimSlack after a grant to token was first heard
// of at heard, that key (its Redis name, the notice's channel) no longer
// holds that grant.
func (w *world) checkClaimed(key, token string, owner int, heard time.Duration) {
	v, err := w.serversOf(key)[0].M.Get(key)
	if err != nil || padlock.StoredToken(v) != token {
		return
	}
	now := w.chk.now()
	g := &w.grants
	g.mu.Lock()
	lost := g.lost[token][owner]
	g.mu.Unlock()
	start := w.tr.Start()
	switch {
	case owner < 0 || lost:
	case owner == w.doomed && w.killedAt() >= 0:
	case w.closedAt[owner].Load() != 0 || w.isClosed(owner):
	case w.pausedIn(start.Add(heard-maxInFlight), start.Add(now)) || w.chk.restartIn(heard-maxInFlight, now):
	case w.claimFaulted(owner, token, heard-claimSlack, now):
		// A fault on the grantee's commands still in reach: its claim,
		// or its withdraw, may be the one faulted, or a stall may hold
		// up the waiter that claims. (A bid that a late copy placed is
		// granted after its fault is over: no excuse; nor is any other
		// fault of the grantee's Locker meanwhile.)
	default:
		w.chk.fail(invClaimed, now, "%s: the grant to %s (L%d's bid), heard of at %.3fs, still holds the key %v later, unclaimed: its waiter neither claimed it nor let it go%s",
			key, token, owner, heard.Seconds(), now-heard, w.killNote())
	}
}
