package padlock_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/padlockgo/padlock"

	"github.com/redis/go-redis/v9"
)

// The order invariants: the promises about who goes first, read off
// queue snapshots and the Lockers' observers.
//
//   - queue-order: "Fair: true queues waiters in Redis for strict arrival
//     order": a waiter that joins a queue (fair mutex, fair semaphore,
//     read-write writers) goes behind every waiter queued before it.
//   - handoff-order: "In one process the lock is handed straight to the
//     next waiter, in arrival order": a lock handed on within a Locker
//     never passes over a waiter that joined the line for the key
//     earlier and went on waiting.
//   - writer-first: "Writers are not starved ... while one is queued new
//     readers wait too": no read hold goes to a reader that came after a
//     writer was queued, while that writer still waits.
//   - turns: "processes that want the key take turns, each serving the
//     waiters it had queued": a lock handed on within a Locker goes to a
//     waiter that was in its line when the Locker's turn began, whenever
//     another Locker's waiter asked for the key since.
//   - permit-order: "Fair: waiters queue in Redis and free permits go to
//     the oldest live waiters": once a permit went to a waiter behind a
//     live queued one (or to a newcomer), a permit stays free for every
//     waiter ahead, so the semaphore is never full while one of them is
//     still queued.

const (
	invQueueOrder   = "queue-order"   // a newcomer queued ahead of a waiter queued before it
	invHandOffOrder = "handoff-order" // a local hand-off passed over a waiter that joined the line earlier
	invWriterFirst  = "writer-first"  // a reader that came after a queued writer was let in before it
	invPermitOrder  = "permit-order"  // a fair permit went past a queued waiter, which then found none left
	invTurns        = "turns"         // a Locker's turn went on to a waiter that came during it, while another Locker's waiter asked
)

// orderSlack is how long after an operation's end what it did in Redis
// may still take effect without a fault: a round trip or two, with the
// commands of a run in steps of coarseTick.
const orderSlack = 20 * time.Millisecond

// orderSeen is what the order invariants (and the election's and TTL's,
// explore_election_test.go, explore_promise_test.go) have seen.
type orderSeen struct {
	mu sync.Mutex
	// ops are the waiting Acquires of the locker goroutines, as they
	// began.
	ops []*opSeen
	// setsWaited are the AcquireAlls of the fleet runs, by Locker, from
	// the call to the release: one that waits for a busy key takes it
	// and, when its other keys are busy, gives it back, a turn the checks
	// cannot see; and it is never fair.
	setsWaited map[int][][2]time.Duration
	// setsTook: when an AcquireAll of each Locker returned a set that
	// holds the fleet run's key: a turn of that Locker's.
	setsTook map[int][]time.Duration
	// queues are the last snapshot of each queue, by server and name.
	queues map[string]*queueSnapshot
	// queuedAt is when a snapshot first showed each place queued;
	// touched, when the replies came to the commands that named each
	// place (attempts, which may queue it again at the end).
	queuedAt map[string]time.Duration
	touched  map[string][]time.Duration
	jumps    []queueJump
	// grants of the election's lock (reply time and fence), read off the
	// commands.
	elected []electedSeen
	// proclaims that returned nil, and what Observe reported.
	proclaims []proclaimSeen
	reports   []reportSeen
	sent      map[*hold][]string // each term's values, in the order they were published
	// ttls are the TTL calls that reported a lease.
	ttls []ttlSeen
	// sems are the last atomic snapshot of each fair semaphore (its
	// live permits and queue), by server and queue; placeOf the place
	// each permit token's attempt named; passed, the waiters a permit
	// went past while the semaphore then stood full.
	sems    map[string]*semSnapshot
	placeOf map[string]string
	passed  []permitPass
	// lost is when notices of a grant at release were lost
	// (faultNotices): one to a waiter that had given up then holds the
	// key, nobody's, until its lease ends (the progress invariant).
	lost []time.Duration
	// asks are the attempts of waiting Acquires that found the key held,
	// and so asked the holder's Locker for it with a "want" notice, as
	// their replies came back without a fault (the turns invariant).
	asks []askSeen
}

// askSeen is an attempt of Locker li's, answered at at, that found the
// lock key held.
type askSeen struct {
	li  int
	key string // the Redis key
	at  time.Duration
	op  *opSeen // the waiting Acquire that sent it (nil: unknown, a batch)
}

// sawAsk records c, a command client li sent that came back without a
// fault, if it is an attempt of a waiting Acquire that found the key held
// (acquire.lua: its ARGV[5] is '1', and it answers the holder's lease as
// a negative number).
func (w *world) sawAsk(li int, c redis.Cmder, op *opSeen) {
	args := c.Args()
	if len(args) < 10 || w.cluster != nil || w.redlock {
		return
	}
	gs, ok := w.tokens.scripts[fmt.Sprint(args[1])]
	if !ok || gs.Name != "acquire" {
		return
	}
	nk, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil || 3+nk+4 >= len(args) || fmt.Sprint(args[3+nk+4]) != "1" {
		return
	}
	cmd, ok := c.(interface{ Val() any }) // a *redis.Cmd, or padlock's wrapper of one
	if !ok {
		return
	}
	busy := false
	switch v := cmd.Val().(type) {
	case int64:
		busy = v < 0
	case []any:
		n, isInt := v[0].(int64)
		busy = len(v) == 2 && isInt && n < 0
	}
	if busy {
		w.order.mu.Lock()
		w.order.asks = append(w.order.asks, askSeen{li, fmt.Sprint(args[3]), w.chk.now(), op})
		w.order.mu.Unlock()
	}
}

// grantLost records that the notice of a grant at release was lost at now.
func (o *orderSeen) grantLost(now time.Duration) {
	o.mu.Lock()
	o.lost = append(o.lost, now)
	o.mu.Unlock()
}

type semSnapshot struct {
	at      time.Duration
	holders map[string]bool // live permit tokens
	queue   []string        // the places of the live entries, in order
}

// permitPass is a new permit seen in a full semaphore: a violation if
// its attempt's place stood behind a waiter of last that is still in cur
// (or it had none: a newcomer), and that waiter met no fault.
type permitPass struct {
	at, since time.Duration
	queue     string
	token     string // the new permit's
	last, cur []string
	holders   int
}

type queueSnapshot struct {
	at      time.Duration
	entries []string
}

// queueJump is a newcomer seen ahead of a waiter queued before it: a
// violation unless the waiter's commands met a fault (a late copy of an
// attempt may queue a waiter again, at the end).
type queueJump struct {
	since, at time.Duration // the snapshots before and with the jump
	queue     string
	newcomer  string
	behind    string
	entries   []string
}

func newOrderSeen() *orderSeen {
	return &orderSeen{queues: map[string]*queueSnapshot{}, queuedAt: map[string]time.Duration{}, touched: map[string][]time.Duration{}, sent: map[*hold][]string{},
		sems: map[string]*semSnapshot{}, placeOf: map[string]string{}}
}

// lineObserver tells the order invariants when an Acquire of Locker li
// joined its Locker's line, and whether it was handed the lock there.
type lineObserver struct {
	padlock.NopObserver
	w *world
}

func (o lineObserver) AcquireWait(ctx context.Context, _ padlock.AcquireWaitEvent) {
	if op, _ := ctx.Value(opKey{}).(*opSeen); op != nil {
		now := o.w.chk.now()
		op.mu.Lock()
		op.waited, op.waitAt = true, now
		op.mu.Unlock()
	}
}

func (o lineObserver) AcquireEnd(ctx context.Context, e padlock.AcquireEndEvent) {
	if op, _ := ctx.Value(opKey{}).(*opSeen); op != nil && e.Outcome == padlock.OutcomeHandedOff {
		op.mu.Lock()
		op.handedOff = true
		op.mu.Unlock()
	}
}

// began records op, an Acquire of kind on key by Locker li, called now.
func (w *world) began(op *opSeen, li int, kind, key string, o padlock.Options) {
	now := w.chk.now()
	op.mu.Lock()
	op.li, op.kind, op.key, op.fair, op.began, op.ended, op.granted = li, kind, key, o.Fair, now, -1, -1
	op.mu.Unlock()
	w.order.mu.Lock()
	w.order.ops = append(w.order.ops, op)
	w.order.mu.Unlock()
}

// ended records that op returned now, with a grant or not.
func (w *world) ended(op *opSeen, granted bool) {
	now := w.chk.now()
	op.mu.Lock()
	op.ended = now
	if granted {
		op.granted = now
	}
	op.mu.Unlock()
}

// snapshotQueue checks one snapshot of queue on srv against the last:
// a place never seen before may stand only behind every entry that was
// there before (the same entry: a place queued again has a new one).
func (w *world) snapshotQueue(srv, queue string, entries []string) {
	now := w.chk.now()
	o := w.order
	o.mu.Lock()
	defer o.mu.Unlock()
	k := srv + "|" + queue
	last := o.queues[k]
	start := w.tr.Start()
	// Across a restart every waiter queues again; across a pause the
	// commands held back run at once, copies of earlier attempts among
	// them, in any order.
	if last != nil && !w.chk.restartIn(last.at, now) && !w.pausedIn(start.Add(last.at), start.Add(now)) {
		before := map[string]bool{}
		for _, e := range last.entries {
			before[queuedPlace(e)] = true
		}
		newcomer := ""
		for _, e := range entries {
			place := queuedPlace(e)
			if _, seen := o.queuedAt[place]; !seen && newcomer == "" {
				newcomer = place
				continue
			}
			if newcomer != "" && before[place] {
				o.jumps = append(o.jumps, queueJump{since: last.at, at: now, queue: queue, newcomer: newcomer, behind: place, entries: entries})
				break
			}
		}
	}
	for _, e := range entries {
		place := queuedPlace(e)
		if _, seen := o.queuedAt[place]; !seen {
			o.queuedAt[place] = now
		}
	}
	o.queues[k] = &queueSnapshot{at: now, entries: entries}
}

// touchedPlace records that a command naming place was answered now.
func (w *world) touchedPlace(place string) {
	if place == "" {
		return
	}
	now := w.chk.now()
	w.order.mu.Lock()
	w.order.touched[place] = append(w.order.touched[place], now)
	w.order.mu.Unlock()
}

// attemptPlace records that the attempt under token named place.
func (w *world) attemptPlace(token, place string) {
	if token == "" || place == "" {
		return
	}
	w.order.mu.Lock()
	w.order.placeOf[token] = place
	w.order.mu.Unlock()
}

// semRead reads a semaphore's live permits and queue at one instant of
// the server's clock.
var semRead = redis.NewScript(`
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {now, redis.call('zrangebyscore', KEYS[1], '(' .. now, '+inf'), redis.call('lrange', KEYS[2], 0, -1)}`)

// snapshotSem checks a fair semaphore of capacity permits whose queue is
// queue, through c (a client without faults), against its last snapshot.
func (w *world) snapshotSem(ctx context.Context, c *redis.Client, srv, queue string, capacity int) {
	v, err := semRead.Run(ctx, c, []string{strings.TrimSuffix(queue, ":queue"), queue}).Slice()
	if err != nil || len(v) != 3 {
		return
	}
	nowMs, _ := v[0].(int64)
	members, _ := v[1].([]any)
	entries, _ := v[2].([]any)
	cur := &semSnapshot{at: w.chk.now(), holders: map[string]bool{}}
	for _, m := range members {
		cur.holders[fmt.Sprint(m)] = true
	}
	for _, e := range entries {
		deadline, _, _ := strings.Cut(fmt.Sprint(e), ":")
		place := queuedPlace(fmt.Sprint(e))
		if d, err := strconv.ParseInt(deadline, 10, 64); err == nil && d >= nowMs {
			cur.queue = append(cur.queue, place)
		}
	}
	o := w.order
	o.mu.Lock()
	defer o.mu.Unlock()
	k := srv + "|" + queue
	last := o.sems[k]
	o.sems[k] = cur
	start := w.tr.Start()
	if last == nil || len(cur.holders) < capacity || w.chk.restartIn(last.at, cur.at) || w.pausedIn(start.Add(last.at), start.Add(cur.at)) {
		return
	}
	for token := range cur.holders {
		if !last.holders[token] {
			// Which place its attempt named is known once its reply
			// came: at the end.
			o.passed = append(o.passed, permitPass{at: cur.at, since: last.at, queue: queue, token: token, last: last.queue, cur: cur.queue, holders: len(cur.holders)})
		}
	}
}

// queuesGone forgets the snapshots of srv's queues that are not in keys:
// a queue that emptied starts anew.
func (w *world) queuesGone(srv string, keys []string) {
	o := w.order
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.queues {
		if name, ok := strings.CutPrefix(k, srv+"|"); ok && !slices.Contains(keys, name) {
			delete(o.queues, k)
		}
	}
}

// checkPermitOrder confirms the passes seen: the waiter passed over met
// no fault (a late copy of an attempt may queue a waiter again).
func (w *world) checkPermitOrder() {
	w.order.mu.Lock()
	passed := slices.Clone(w.order.passed)
	w.order.mu.Unlock()
	for _, p := range passed {
		w.order.mu.Lock()
		place, known := w.order.placeOf[p.token]
		w.order.mu.Unlock()
		if !known {
			continue
		}
		// Past every waiter queued ahead of its place (all of them, for
		// a newcomer) that is still queued.
		at := slices.Index(p.last, place)
		if at < 0 {
			at = len(p.last)
		}
		for _, ahead := range p.last[:at] {
			if !slices.Contains(p.cur, ahead) {
				continue
			}
			if _, faulted := w.faultedPlace(ahead); faulted {
				continue
			}
			w.chk.fail(invPermitOrder, p.at, "%s: a permit went to %s between %.4fs and %.4fs, past %s, which is still queued while all %d permits are held",
				p.queue, p.token, p.since.Seconds(), p.at.Seconds(), ahead, p.holders)
			return
		}
	}
}

// checkOrder runs the order invariants at the end of a run.
func (w *world) checkOrder() {
	w.checkTTLs()
	w.checkPermitOrder()
	w.checkQueueJumps()
	w.checkHandOffOrder()
	w.checkTurns()
	w.checkTurnBound()
	w.checkBidFresh()
	w.checkBidOwned()
	w.checkWriterFirst()
	w.checkLeaderAfterGrant()
	w.checkObserved()
}

// faultedPlace reports whether the operation that queued place met a
// fault (true, too, when it is not known).
func (w *world) faultedPlace(place string) (*opSeen, bool) {
	w.sets.mu.Lock()
	op, faulted := w.sets.owner[place], w.sets.faulted[place]
	w.sets.mu.Unlock()
	if op == nil {
		return nil, true
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	return op, faulted || op.faulted
}

func (w *world) checkQueueJumps() {
	w.order.mu.Lock()
	jumps := slices.Clone(w.order.jumps)
	w.order.mu.Unlock()
	for _, j := range jumps {
		if _, faulted := w.faultedPlace(j.behind); faulted {
			continue
		}
		// A waiter handed the lock that could not take it after all
		// queues again, at the end, by an attempt of its own.
		w.order.mu.Lock()
		again := slices.ContainsFunc(w.order.touched[j.behind], func(t time.Duration) bool { return t > j.since && t <= j.at+orderSlack })
		w.order.mu.Unlock()
		if again {
			continue
		}
		w.chk.fail(invQueueOrder, j.at, "queue %s: newcomer %s stands ahead of %s, queued before it: %v", j.queue, j.newcomer, j.behind, j.entries)
		return
	}
}

// opView is a copy of what an op recorded, read under its lock.
type opView struct {
	li                          int
	kind, key                   string
	fair, waited, handedOff     bool
	faulted                     bool
	began, ended, granted, wait time.Duration
}

func (w *world) opViews() []opView {
	w.order.mu.Lock()
	ops := slices.Clone(w.order.ops)
	w.order.mu.Unlock()
	vs := make([]opView, len(ops))
	for i, op := range ops {
		op.mu.Lock()
		vs[i] = opView{op.li, op.kind, op.key, op.fair, op.waited, op.handedOff, op.faulted, op.began, op.ended, op.granted, op.waitAt}
		op.mu.Unlock()
	}
	return vs
}

// checkHandOffOrder: a lock handed on within a Locker went to the first
// of its line for the key. An earlier waiter that went on waiting after
// the hand-off, with no fault on its commands and no pause to hold its
// end back, was passed over.
func (w *world) checkHandOffOrder() {
	ops := w.opViews()
	start := w.tr.Start()
	for _, h := range ops {
		if !h.handedOff || h.fair || h.kind != "mutex" {
			continue
		}
		for _, a := range ops {
			if a.li != h.li || a.key != h.key || a.kind != "mutex" || a.fair || !a.waited || a.wait >= h.wait || a.faulted {
				continue
			}
			end := a.ended
			if end < 0 {
				end = w.chk.now()
			}
			if end <= h.ended+orderSlack || w.pausedIn(start.Add(h.ended), start.Add(end)) {
				continue
			}
			w.chk.fail(invHandOffOrder, h.ended, "L%d handed %s to a waiter that joined its line at %.4fs, past one that joined at %.4fs and waited on until %.4fs",
				h.li, h.key, h.wait.Seconds(), a.wait.Seconds(), end.Seconds())
			return
		}
	}
}

// wantSlack is how late a "want" notice may reach the holder's Locker
// after its waiter's attempt returned without a fault: its delivery, and
// the SUBSCRIBE of a line that had just formed.
const wantSlack = 50 * time.Millisecond

// checkTurns: a lock handed on within Locker A, to an Acquire h that
// joined A's line after A's turn began (A's last Acquire of the key that
// did not get it by a hand-off returned), though an attempt of another
// Locker's waiter found the key held after h joined and before the
// hand-off (so it asked for the key, and A, listening for h, heard it
// before it handed the key on): A's turn went on past the waiters it had
// queued. On one node, in the mutex family, in runs whose notices meet
// no fault, for Acquires without faults and with no pause or restart in
// between.
func (w *world) checkTurns() {
	if w.fam != "mutex" || w.redlock || w.cluster != nil || len(w.srvs) > 1 || w.noticesFaulted || len(w.lockers) == 0 {
		return
	}
	ops := w.opViews()
	w.order.mu.Lock()
	asks := slices.Clone(w.order.asks)
	w.order.mu.Unlock()
	start := w.tr.Start()
	for _, h := range ops {
		if !h.handedOff || h.fair || h.kind != "mutex" || h.faulted || !h.waited {
			continue
		}
		// When A's turn began: the last grant of the key to one of A's
		// Acquires that was not handed it.
		began := time.Duration(-1)
		for _, r := range ops {
			if r.li == h.li && r.key == h.key && r.kind == "mutex" && !r.handedOff && r.granted >= 0 && r.granted < h.ended && r.granted > began {
				began = r.granted
			}
		}
		if began < 0 || h.wait <= began+orderSlack {
			continue // h may have been in line as the turn began
		}
		if w.pausedIn(start.Add(began), start.Add(h.ended)) || w.chk.restartIn(began, h.ended) || w.setWaitedIn(h.li, began, h.ended) {
			continue
		}
		// An ask heard before the hand-off, and fresh then (a want counts
		// for two seconds; one).
		key := w.lockers[0].RedisKey(h.key)
		for _, a := range asks {
			if a.li == h.li || a.key != key || a.at <= h.wait+orderSlack || a.at >= h.ended-wantSlack || a.at < h.ended-time.Second {
				continue
			}
			w.chk.fail(invTurns, h.ended, "L%d handed %s to a waiter that joined its line at %.4fs, after its turn began at %.4fs, though L%d's waiter asked for the key at %.4fs",
				h.li, h.key, h.wait.Seconds(), began.Seconds(), a.li, a.at.Seconds())
			return
		}
	}
}

// checkWriterFirst: no read hold went to a reader called after a snapshot
// showed a writer queued for the key, while that writer went on waiting
// (its entry stays until it is served or leaves, as its wait ends).
func (w *world) checkWriterFirst() {
	if w.fam != "rw" {
		return
	}
	ops := w.opViews()
	w.order.mu.Lock()
	queuedAt := make(map[string]time.Duration, len(w.order.queuedAt))
	for p, at := range w.order.queuedAt {
		queuedAt[p] = at
	}
	w.order.mu.Unlock()
	start := w.tr.Start()
	for place, seen := range queuedAt {
		op, faulted := w.faultedPlace(place)
		if faulted {
			continue
		}
		op.mu.Lock()
		wr := opView{kind: op.kind, key: op.key, ended: op.ended}
		op.mu.Unlock()
		if wr.kind != "write" {
			continue
		}
		for _, r := range ops {
			if r.kind != "read" || r.key != wr.key || r.granted < 0 || r.began <= seen || r.granted+orderSlack >= wr.ended ||
				w.chk.restartIn(seen, r.granted) || w.pausedIn(start.Add(seen), start.Add(r.granted)) {
				continue
			}
			w.chk.fail(invWriterFirst, r.granted, "a reader of %s called at %.4fs was let in at %.4fs, though a writer was queued at %.4fs and waited until %.4fs",
				r.key, r.began.Seconds(), r.granted.Seconds(), seen.Seconds(), wr.ended.Seconds())
			return
		}
	}
}

// setWaited records an AcquireAll of Locker li, from began until now.
func (w *world) setWaited(li int, began time.Duration) {
	o := w.order
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.setsWaited == nil {
		o.setsWaited = map[int][][2]time.Duration{}
	}
	o.setsWaited[li] = append(o.setsWaited[li], [2]time.Duration{began, w.chk.now()})
}

// setTook records that an AcquireAll of Locker li returned, now, a set
// that holds the fleet run's key.
func (w *world) setTook(li int) {
	o := w.order
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.setsTook == nil {
		o.setsTook = map[int][]time.Duration{}
	}
	o.setsTook[li] = append(o.setsTook[li], w.chk.now())
}

// turnOfSetOrGrant reports whether Locker li began a turn in (from, to)
// that the ops do not show: an AcquireAll of li's returned its set, or a
// release granted the key to a bid of li's (a set's, which may claim it
// and give it back when its other keys are busy, or a single-key
// waiter's, whose grant the ops show too).
func (w *world) turnOfSetOrGrant(li int, from, to time.Duration) bool {
	in := func(t time.Duration) bool { return t > from && t < to }
	o := w.order
	o.mu.Lock()
	took := slices.ContainsFunc(o.setsTook[li], in)
	o.mu.Unlock()
	g := &w.grants
	g.mu.Lock()
	granted := slices.ContainsFunc(g.to[li], in)
	g.mu.Unlock()
	return took || granted
}

// setWaitedIn reports whether an AcquireAll of Locker li ran at some time
// in (from, to): it may have begun a turn of li's then.
func (w *world) setWaitedIn(li int, from, to time.Duration) bool {
	o := w.order
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.setsWaited[li] {
		if s[0] < to && s[1] > from {
			return true
		}
	}
	return false
}

// anySetWaitedIn reports whether an AcquireAll of any Locker ran at some
// time in (from, to).
func (w *world) anySetWaitedIn(from, to time.Duration) bool {
	for li := range w.lockers {
		if w.setWaitedIn(li, from, to) {
			return true
		}
	}
	return false
}
