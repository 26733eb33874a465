package padlock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/redis/go-redis/v9"
)

// The bid-fresh invariant: "a waiter that bids places its bid again every
// bidRefresh while it waits, so only one that is gone has one so old"
// (wait_claim.go; lua/claim.lua: a bid placed bidLife ago is not granted).
// Read off Redis in the mutex fleet runs on one node: every 50 ms the
// explorer reads the key's bids hash ("<ms registered> <lease ms>
// <token>" by Locker, lua/bids.lua); a bid registered more than
// bidRefresh and bidFreshSlack ago, whose Locker has had a waiting
// Acquire of the key since before then that found the key held (it bids)
// and still waits, breaks it: that waiter, or the one ahead of it in its
// Locker's line, was to place it again (an AcquireAll first in the line
// too: it waits for the busy key as a single-key waiter does). Excused: a
// fault of that Locker in reach, a pause or restart, a kill of it, a fair
// waiter of it on the key in the stretch.
const invBidFresh = "bid-fresh"

// bidFreshSlack is what the invariant allows past bidRefresh: round
// trips and the goroutine stalls of a run.
const bidFreshSlack = 300 * time.Millisecond

// staleBid is a bid the explorer read older than bidRefresh and
// bidFreshSlack.
type staleBid struct {
	at, placed time.Duration // when it was read, and registered (run time)
	key, token string        // the lock's Redis key, and the bid's token
}

// The bid-owned invariant: a bid stands only for a waiter ("a waiter
// that gives up withdraws its bids, and so does the last waiter to leave
// a Locker's line for the bids passed to the line", wait_claim.go). In
// the same reads, a bid whose Locker has had no waiting Acquire or
// AcquireAll of the key for bidOwnedSlack breaks it: a release would
// grant the key to it, for nobody. Excused: a fault of that Locker in
// reach (a withdraw may be the one faulted), a pause or restart, a kill
// of it.
const invBidOwned = "bid-owned"

// bidOwnedSlack is how long a Locker's last waiter may take to withdraw
// its bids once it left: the withdrawal goes behind the Acquire's answer.
const bidOwnedSlack = 200 * time.Millisecond

// bidsRead is what the invariants have read.
type bidsRead struct {
	mu    sync.Mutex
	stale []staleBid
	all   []staleBid // every bid read (bid-owned)
}

// watchBids reads the bids hashes every 50 ms until the run ends, in a
// mutex fleet run on one node.
func (w *world) watchBids() {
	if !w.fleet || w.fam != "mutex" || w.cluster != nil || len(w.srvs) != 1 {
		return
	}
	s := w.srvs[0]
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: s.Dial, DisableIdentity: true, Protocol: 2})
	defer c.Close()
	for time.Now().Before(w.end) {
		time.Sleep(50 * time.Millisecond)
		w.readBids(context.Background(), c)
	}
}

// readBids reads the bids hashes of the server c reaches and records the
// stale bids.
func (w *world) readBids(ctx context.Context, c *redis.Client) {
	keys, _ := c.Keys(ctx, "*:bids").Result()
	now := w.chk.now()
	nowMs := time.Now().UnixMilli()
	for _, k := range keys {
		bids, err := c.HGetAll(ctx, k).Result()
		if err != nil {
			continue
		}
		for _, v := range bids {
			f := strings.Fields(v)
			if len(f) != 3 {
				continue
			}
			ms, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				continue
			}
			age := time.Duration(nowMs-ms) * time.Millisecond
			b := staleBid{at: now, placed: now - age, key: strings.TrimSuffix(k, ":bids"), token: f[2]}
			w.bids.mu.Lock()
			w.bids.all = append(w.bids.all, b)
			if age > padlock.BidLife/2+bidFreshSlack {
				w.bids.stale = append(w.bids.stale, b)
			}
			w.bids.mu.Unlock()
		}
	}
}

// checkBidFresh checks the stale bids read against the waiters of their
// Lockers, at the end of a run.
func (w *world) checkBidFresh() {
	w.bids.mu.Lock()
	stale := slices.Clone(w.bids.stale)
	w.bids.mu.Unlock()
	if len(stale) == 0 {
		return
	}
	ops := w.opViews()
	w.order.mu.Lock()
	asks := slices.Clone(w.order.asks)
	w.order.mu.Unlock()
	for _, s := range stale {
		li := w.ownerOf(s.token)
		key := w.keyOfRedis(s.key)
		if li < 0 || key == "" {
			continue
		}
		// The stretch in which its Locker's first waiter was to place the
		// bid again.
		from := s.at - padlock.BidLife/2 - bidFreshSlack
		if w.bidExcused(li, from, s.at) {
			continue
		}
		if slices.ContainsFunc(ops, func(o opView) bool {
			return o.li == li && o.key == key && o.fair && o.began < s.at && (o.ended < 0 || o.ended > from)
		}) {
			continue
		}
		for _, a := range asks {
			if a.op == nil || a.li != li || a.key != s.key || a.at > from {
				continue
			}
			a.op.mu.Lock()
			o := opView{li: a.op.li, kind: a.op.kind, key: a.op.key, fair: a.op.fair, faulted: a.op.faulted, began: a.op.began, ended: a.op.ended, granted: a.op.granted}
			a.op.mu.Unlock()
			waiting := (o.granted < 0 || o.granted > s.at) && (o.ended < 0 || o.ended > s.at+giveUpSlack)
			if o.kind != "mutex" || o.fair || o.faulted || !waiting {
				continue
			}
			w.chk.fail(invBidFresh, s.at, "%s: L%d's bid %s, registered at %.3fs, is %v old while its waiter, which found the key held at %.3fs, still waits: a waiting Locker's bid is placed again every %v",
				key, li, s.token, s.placed.Seconds(), (s.at - s.placed).Round(time.Millisecond), a.at.Seconds(), padlock.BidLife/2)
			return
		}
	}
}

// checkBidOwned checks every bid read against the waiters of its Locker,
// at the end of a run.
func (w *world) checkBidOwned() {
	w.bids.mu.Lock()
	all := slices.Clone(w.bids.all)
	w.bids.mu.Unlock()
	if len(all) == 0 {
		return
	}
	ops := w.opViews()
	for _, b := range all {
		li := w.ownerOf(b.token)
		key := w.keyOfRedis(b.key)
		if li < 0 || key == "" {
			continue
		}
		since := b.at - bidOwnedSlack
		if w.bidExcused(li, since, b.at) || w.setWaitedIn(li, since, b.at+maxInFlight) {
			continue
		}
		if slices.ContainsFunc(ops, func(o opView) bool {
			return o.li == li && o.key == key && o.began <= b.at && (o.ended < 0 || o.ended >= since)
		}) {
			continue
		}
		w.chk.fail(invBidOwned, b.at, "%s: L%d's bid %s (registered at %.3fs) stands at %.3fs, while no waiter of L%d has waited for the key since %.3fs: a release would grant it to nobody",
			key, li, b.token, b.placed.Seconds(), b.at.Seconds(), li, since.Seconds())
		return
	}
}

// bidExcused reports whether what Locker li's bid did from from to at is
// excused: a fault of li in reach from a second before, a pause or
// restart then, or li killed.
func (w *world) bidExcused(li int, from, at time.Duration) bool {
	start := w.tr.Start()
	return w.faultedIn(li, from-time.Second, at) || w.chk.restartIn(from-time.Second, at) ||
		w.pausedIn(start.Add(from-time.Second), start.Add(at)) ||
		li == w.doomed && w.killedAt() >= 0 && w.killedAt() < at+maxInFlight
}
