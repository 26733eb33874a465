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

// The order invariants: the promises about who goes first, and about
// what the election tells its callers, read off queue snapshots, the
// Lockers' observers and the replies of the commands themselves.
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
//   - leader-stale (more of it): Leader never reports a term after
//     another term's lock was granted: the record it names can no longer
//     hold.
//   - proclaim-truthful: a Campaign or Proclaim that returns nil wrote its
//     record ("Lost leadership is loud").
//   - permit-order: "Fair: waiters queue in Redis and free permits go to
//     the oldest live waiters": once a permit went to a waiter behind a
//     live queued one (or to a newcomer), a permit stays free for every
//     waiter ahead, so the semaphore is never full while one of them is
//     still queued.
//   - ttl-truthful: "Once a lock's lease ran out, TTL ... return
//     ErrNotHeld": TTL never reports a lease after another grant took
//     the key (a restart without persistence lets one in while the
//     holder still trusts its lease).
//   - observe-all: Observe reports a Proclaim ("each new term (or
//     Proclaim) as it is published") when the term kept it for a while.

const (
	invQueueOrder       = "queue-order"       // a newcomer queued ahead of a waiter queued before it
	invHandOffOrder     = "handoff-order"     // a local hand-off passed over a waiter that joined the line earlier
	invWriterFirst      = "writer-first"      // a reader that came after a queued writer was let in before it
	invProclaimTruthful = "proclaim-truthful" // Campaign or Proclaim returned nil though Redis wrote no record
	invObserveAll       = "observe-all"       // Observe missed a Proclaim its term kept
	invTTLTruthful      = "ttl-truthful"      // TTL reported a lease for a lock another grant had taken over
	invPermitOrder      = "permit-order"      // a fair permit went past a queued waiter, which then found none left
)

// orderSlack is how long after an operation's end what it did in Redis
// may still take effect without a fault: a round trip or two, with the
// commands of a run in steps of coarseTick.
const orderSlack = 20 * time.Millisecond

// observeWithin is how long a published value must stay for Observe to
// owe a report of it: notices flow through a client without faults, so a
// report takes a round trip (on one node: the Cluster in memory has no
// sharded pub/sub).
const observeWithin = 100 * time.Millisecond

// orderSeen is what the order invariants have seen.
type orderSeen struct {
	mu sync.Mutex
	// ops are the waiting Acquires of the locker goroutines, as they
	// began.
	ops []*opSeen
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

type ttlSeen struct {
	h            *hold
	called, said time.Duration
	d            time.Duration
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

type electedSeen struct {
	at    time.Duration
	fence int64
}

type proclaimSeen struct {
	h               *hold
	value           string
	called, return_ time.Duration
}

type reportSeen struct {
	at time.Duration
	ld padlock.Leader
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
			before[e] = true
		}
		newcomer := ""
		for _, e := range entries {
			_, place, _ := strings.Cut(e, ":")
			if _, seen := o.queuedAt[place]; !seen && newcomer == "" {
				newcomer = place
				continue
			}
			if newcomer != "" && before[e] {
				o.jumps = append(o.jumps, queueJump{since: last.at, at: now, queue: queue, newcomer: newcomer, behind: place, entries: entries})
				break
			}
		}
	}
	for _, e := range entries {
		_, place, _ := strings.Cut(e, ":")
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
		deadline, place, _ := strings.Cut(fmt.Sprint(e), ":")
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

// sawElection reads, off a command whose reply came now, a grant of the
// election's lock and a leader record's write (for op, if any).
func (w *world) sawElection(op *opSeen, c redis.Cmder, token string, cerr error) {
	if cerr != nil || w.electKey == "" {
		return
	}
	args := c.Args()
	if len(args) < 4 {
		return
	}
	// A script's command (redis.Cmd, or padlock's own that embeds it).
	reply, _ := c.(interface{ Val() any })
	if reply == nil {
		return
	}
	if token != "" && fmt.Sprint(args[3]) == w.electKey {
		if f := fenceOf(reply.Val()); f > 0 {
			w.order.mu.Lock()
			w.order.elected = append(w.order.elected, electedSeen{at: w.chk.now(), fence: f})
			w.order.mu.Unlock()
		}
		return
	}
	if op != nil && w.tokens.elect[fmt.Sprint(args[1])] {
		if n, ok := reply.Val().(int64); ok {
			op.mu.Lock()
			op.records = append(op.records, n)
			op.mu.Unlock()
		}
	}
}

// fenceOf reads a grant script's reply: its fence, or its first and last.
func fenceOf(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case []any:
		if len(v) > 0 {
			f, _ := v[0].(int64)
			return f
		}
	}
	return 0
}

// recorded checks a Campaign or Proclaim of g that returned nil, whose
// commands op saw: one of its leader-record writes was answered 1.
func (w *world) recorded(g, what string, op *opSeen) {
	op.mu.Lock()
	records := slices.Clone(op.records)
	op.mu.Unlock()
	if len(records) > 0 && !slices.Contains(records, 1) {
		w.chk.fail(invProclaimTruthful, w.chk.now(), "%s: %s returned nil, but Redis answered %v to its record writes: the term no longer held the lock", g, what, records)
	}
}

// proclaimed records a Proclaim of value for h, called at called, that
// returned nil now.
func (w *world) proclaimed(h *hold, value string, called time.Duration) {
	now := w.chk.now()
	w.order.mu.Lock()
	w.order.proclaims = append(w.order.proclaims, proclaimSeen{h: h, value: value, called: called, return_: now})
	w.order.mu.Unlock()
}

// publishing records that h publishes value, in this order.
func (w *world) publishing(h *hold, value string) {
	w.order.mu.Lock()
	w.order.sent[h] = append(w.order.sent[h], value)
	w.order.mu.Unlock()
}

// reported records what Observe sent, now.
func (w *world) reported(ld padlock.Leader) {
	now := w.chk.now()
	w.order.mu.Lock()
	w.order.reports = append(w.order.reports, reportSeen{at: now, ld: ld})
	w.order.mu.Unlock()
}

// askTTL asks Redis for h's remaining lease, as a holder may between
// steps of its work.
func (w *world) askTTL(h *hold) {
	called := w.chk.now()
	d, err := h.lk.TTL(context.Background())
	w.tr.Add("%s TTL of %s#%d: %v, %v", h.g, h.kind, h.id, d, err)
	if err == nil {
		now := w.chk.now()
		w.order.mu.Lock()
		w.order.ttls = append(w.order.ttls, ttlSeen{h: h, called: called, said: now, d: d})
		w.order.mu.Unlock()
	}
}

// checkTTLs: a TTL that reported a lease was called before any later
// grant of the key returned (its token took the key: the holder's can
// never hold it again).
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

func (w *world) checkTTLs() {
	w.order.mu.Lock()
	ttls := slices.Clone(w.order.ttls)
	w.order.mu.Unlock()
	c := w.chk
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ttls {
		for _, o := range c.holds {
			if o.root == t.h.root || o.key != t.h.key || !o.conflicts(t.h) || o.fence <= t.h.fence || o.start >= t.called {
				continue
			}
			c.vs = append(c.vs, violation{invTTLTruthful, t.said, fmt.Sprintf("%s: TTL called at %.4fs reported %v left, but %s took the key before", t.h, t.called.Seconds(), t.d, o)})
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

// checkLeaderAfterGrant: once the election's lock was granted to a term
// (its reply seen), no earlier term's record counts: Leader never
// reports it in a call begun after.
func (w *world) checkLeaderAfterGrant() {
	w.order.mu.Lock()
	elected := slices.Clone(w.order.elected)
	w.order.mu.Unlock()
	c := w.chk
	c.mu.Lock()
	leaders := slices.Clone(c.leaders)
	c.mu.Unlock()
	for _, s := range leaders {
		if s.none {
			continue
		}
		for _, e := range elected {
			if e.fence > s.ld.Fence && e.at < s.from {
				c.fail(invLeaderStale, s.to, "%s: Leader over %.4fs..%.4fs reported %q fence %d, though the lock went to fence %d at %.4fs",
					s.g, s.from.Seconds(), s.to.Seconds(), s.ld.Value, s.ld.Fence, e.fence, e.at.Seconds())
				return
			}
		}
	}
}

// checkObserved: a Proclaim that returned nil, whose term went on
// holding for observeWithin with no pause or restart, was reported by
// Observe: its value or one the term published after it.
func (w *world) checkObserved() {
	if w.cluster != nil {
		// Observe on a Cluster listens with SSUBSCRIBE, which the
		// servers in memory lack: it reads the record at its recheck
		// alone.
		return
	}
	o := w.order
	o.mu.Lock()
	proclaims, reports := slices.Clone(o.proclaims), slices.Clone(o.reports)
	sent := make(map[*hold][]string, len(o.sent))
	for h, vs := range o.sent {
		sent[h] = slices.Clone(vs)
	}
	o.mu.Unlock()
	start := w.tr.Start()
	runEnd := w.end.Sub(start)
	for _, p := range proclaims {
		w.chk.mu.Lock()
		last, fence := p.h.last, p.h.fence
		w.chk.mu.Unlock()
		until := p.return_ + observeWithin
		if last < until || until > runEnd || w.pausedIn(start.Add(p.called), start.Add(until)) || w.chk.restartIn(p.called, until) {
			continue
		}
		values := sent[p.h]
		i := slices.Index(values, p.value)
		if i < 0 {
			continue
		}
		later := values[i:]
		if slices.ContainsFunc(reports, func(r reportSeen) bool {
			return r.ld.Fence == fence && r.at >= p.called && slices.Contains(later, r.ld.Value)
		}) {
			continue
		}
		w.chk.fail(invObserveAll, until, "%s proclaimed %q (fence %d) at %.4fs and held on to %.4fs, but Observe never reported it or a later value of the term",
			p.h.g, p.value, fence, p.return_.Seconds(), last.Seconds())
		return
	}
}
