package padlock_test

import (
	"slices"
	"time"
)

// The turn-bound invariant: "a waiter waits at most one turn of each
// other process that wants the key" (docs/locks.md, "How the guarantees
// are kept"; wait_handoff.go). A waiter whose attempt finds the key held
// leaves its Locker's bid in Redis, and every release that ends a turn
// grants the key to the bid of the Locker next in the circular order of
// the ids after the releaser's (lua/bids.lua). While that bid stands, the
// order passes it before it comes back to any other Locker: no Locker
// begins two turns (takes the key from Redis twice, by an attempt or a
// grant, not by a hand-off in its line) while the waiter's Locker begins
// none.
//
// Checked in the mutex fleet runs on one node (their leases outlast the
// holds, and their faults have windows), for the waiting Acquires of the
// locker goroutines that met no fault, from their first attempt that
// found the key held (its bid placed) to their grant, or to a give-up
// that began no earlier than giveUpSlack before they returned. Excused: a
// stretch with a fault of any Locker in reach, a grant notice lost, a
// kill (a dead Locker's bid may be granted, and its grant lapse), a pause
// or restart, a fair waiter on the key, a turn of the waiter's Locker
// the ops do not show (an AcquireAll of its that returned its set, or a
// grant to one of its bids: a set's may be given back). An
// AcquireAll takes its turn as a single-key waiter does (it waits for a
// busy key in its Locker's line, and its release grants the key on in
// the same order: lua/multi_release.lua).
const invTurnBound = "turn-bound"

// giveUpSlack is how long a waiter that gives up may take from the end of
// its wait to its return, its withdraw included, on commands without a
// fault: a round trip and the goroutine stalls of the run.
const giveUpSlack = 100 * time.Millisecond

// checkTurnBound checks the turn-bound invariant at the end of a run.
func (w *world) checkTurnBound() {
	if !w.fleet || w.fam != "mutex" || w.cluster != nil || len(w.lockers) == 0 {
		return
	}
	ops := w.opViews()
	w.order.mu.Lock()
	asks := slices.Clone(w.order.asks)
	w.order.mu.Unlock()
	w.grants.mu.Lock()
	noticesLost := slices.Clone(w.grants.lostAt)
	w.grants.mu.Unlock()
	start := w.tr.Start()
	checked := map[*opSeen]bool{}
	for _, a := range asks {
		if a.op == nil || checked[a.op] {
			continue
		}
		checked[a.op] = true // its first ask: the earliest its bid stood
		a.op.mu.Lock()
		wt := opView{li: a.op.li, kind: a.op.kind, key: a.op.key, fair: a.op.fair, faulted: a.op.faulted,
			began: a.op.began, ended: a.op.ended, granted: a.op.granted}
		a.op.mu.Unlock()
		if wt.kind != "mutex" || wt.fair || wt.faulted || wt.li != a.li {
			continue
		}
		// Until when its bid stood for sure: its grant, or the start of
		// its give-up.
		end := wt.granted
		if end < 0 {
			if wt.ended < 0 {
				end = w.chk.now()
			} else {
				end = wt.ended - giveUpSlack
			}
		}
		from := a.at + orderSlack
		if end <= from {
			continue
		}
		if w.faultedIn(-1, a.at, end) || w.chk.restartIn(a.at, end) || w.pausedIn(start.Add(a.at), start.Add(end)) ||
			(w.killedAt() >= 0 && w.killedAt() < end) ||
			slices.ContainsFunc(noticesLost, func(t time.Duration) bool { return t >= a.at-time.Second && t <= end }) {
			continue
		}
		key := w.keyOfRedis(a.key)
		if key == "" || key != wt.key {
			continue
		}
		// The turns begun in (from, end), by Locker.
		turns := map[int][]time.Duration{}
		fairHere := false
		for _, r := range ops {
			if r.key != key {
				continue
			}
			if r.fair && r.began < end && (r.ended < 0 || r.ended > a.at) {
				fairHere = true
			}
			if r.kind == "mutex" && !r.fair && !r.handedOff && r.granted > from && r.granted < end {
				turns[r.li] = append(turns[r.li], r.granted)
			}
		}
		// An AcquireAll of the waiter's own Locker may have taken the key
		// meanwhile (its set returned), or been granted it at a release
		// and, its other keys busy, given it back: a turn the waiter's
		// Locker had, which the ops do not show.
		if fairHere || len(turns[wt.li]) > 0 || w.turnOfSetOrGrant(wt.li, from, end) {
			continue
		}
		for li, ts := range turns {
			if li == wt.li || len(ts) < 2 {
				continue
			}
			slices.Sort(ts)
			w.chk.fail(invTurnBound, ts[1], "L%d's waiter on %s asked for the key at %.4fs and waited until %.4fs, while L%d took it from Redis twice (at %.4fs and %.4fs) and L%d not once",
				wt.li, key, a.at.Seconds(), end.Seconds(), li, ts[0].Seconds(), ts[1].Seconds(), wt.li)
			return
		}
	}
}

// keyOfRedis returns the run's key whose Redis key is rk ("" if none).
func (w *world) keyOfRedis(rk string) string {
	for _, k := range w.keys {
		if w.lockers[0].RedisKey(k) == rk {
			return k
		}
	}
	return ""
}
