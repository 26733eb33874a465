package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/padlockgo/padlock"

	"github.com/redis/go-redis/v9"
)

// What the election tells its callers, read off the Lockers' commands
// and Observe:
//
//   - leader-stale (more of it): Leader never reports a term after
//     another term's lock was granted: the record it names can no longer
//     hold.
//   - proclaim-truthful: a Campaign or Proclaim that returns nil wrote its
//     record ("Lost leadership is loud").
//   - observe-all: Observe reports a Proclaim ("each new term (or
//     Proclaim) as it is published") when the term kept it for a while.

const (
	invProclaimTruthful = "proclaim-truthful" // Campaign or Proclaim returned nil though Redis wrote no record
	invObserveAll       = "observe-all"       // Observe missed a Proclaim its term kept
)

// observeWithin is how long a published value must stay for Observe to
// owe a report of it: notices flow through a client without faults, so a
// report takes a round trip (on one node: the Cluster in memory has no
// sharded pub/sub).
const observeWithin = 100 * time.Millisecond

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

// candidate campaigns in the run's election, leads for a while,
// proclaims new values (sometimes while resigning) and resigns
// (sometimes twice at once).
func (w *world) candidate(actor, li int) {
	r := w.rng(actor)
	g := fmt.Sprintf("c%d@L%d", actor, li)
	l := w.lockers[li]
	ttl := pick(r, w.ttl, w.ttl, w.ttl, 2*time.Second)
	e := l.Election("el", padlock.Options{TTL: ttl})
	for n := 0; time.Now().Before(w.end) && !w.isClosed(li); n++ {
		value := fmt.Sprintf("%s.%d", g, n)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(100+r.IntN(6000))*time.Millisecond)
		began := w.chk.now()
		// The value is published inside Campaign: the checker learns whose
		// it is from the term.
		pending := &hold{fence: -1, kind: "term", key: "el", g: g, released: -1, resigned: -1, releaseFailed: -1, ended: -1}
		w.chk.publish(value, pending)
		ctx, op := withOp(ctx)
		tm, err := e.Campaign(ctx, value)
		if err == nil {
			w.recorded(g, "Campaign", op)
		}
		w.checkCancelled(li, g, "Campaign", ctx, err)
		cancel()
		w.checkClosed(li, g, "Campaign")
		if err != nil {
			w.tr.Add("%s campaign: %v", g, err)
			time.Sleep(time.Duration(r.IntN(50)) * time.Millisecond)
			continue
		}
		h := w.chk.grant(g, "term", "el", tm.Fence(), nil, tm, 1, began, nil)
		w.chk.publish(value, h)
		w.publishing(h, value)
		var side sync.WaitGroup
		steps := 1 + r.IntN(4)
		for i := range steps {
			time.Sleep(time.Duration(1+r.IntN(int(ttl/time.Millisecond)/2)) * time.Millisecond)
			if !w.chk.claim(h) {
				break
			}
			if r.IntN(2) == 0 {
				v := fmt.Sprintf("%s.%d.%d", g, n, i)
				w.chk.publish(v, h)
				w.publishing(h, v)
				side.Go(func() {
					ctx, op := withOp(context.Background())
					called := w.chk.now()
					err := tm.Proclaim(ctx, v)
					w.tr.Add("%s proclaimed %q: %v", g, v, err)
					if err == nil {
						w.recorded(g, "Proclaim", op)
						w.proclaimed(h, v, called)
					}
				})
			}
		}
		resign := func(ctx context.Context, cancel context.CancelFunc) {
			defer cancel()
			err := tm.Resign(ctx)
			w.tr.Add("%s resigned term#%d: %v", g, h.id, err)
			w.chk.resigned(h, err)
		}
		if r.IntN(4) == 0 {
			ctx, cancel := opCtx(r)
			side.Go(func() { resign(ctx, cancel) })
		}
		resign(opCtx(r))
		side.Wait()
	}
}

// observer reads the election's leader, and watches Observe, until the
// run ends.
func (w *world) observer(actor, li int) {
	g := fmt.Sprintf("o%d@L%d", actor, li)
	l := w.lockers[li]
	e := l.Election("el", padlock.Options{})
	ctx, cancel := context.WithDeadline(context.Background(), w.end)
	defer cancel()
	// Observe reads through a client without faults: while its reader
	// sleeps in a faulted Leader, notices fill its PubSub's channel, and
	// miniredis blocks in PUBLISH holding its lock, which on the bubble's
	// clock never lets the sleep end (real Redis buffers its output).
	var late sync.WaitGroup
	oc, closeOC := w.quietClient(100, "obs", &late)
	ol := padlock.NewUnchecked(oc) // without ContextTimeoutEnabled, as quietClient makes it
	defer func() { _ = ol.Close(); closeOC() }()
	var wg sync.WaitGroup
	wg.Go(func() {
		var last padlock.Leader
		for ld := range ol.Election("el", padlock.Options{}).Observe(ctx) {
			w.reported(ld)
			w.tr.Add("%s observed %q fence %d", g, ld.Value, ld.Fence)
			if ld.Fence < last.Fence {
				w.chk.fail(invLeaderFence, w.chk.now(), "%s: Observe sent %q fence %d after %q fence %d", g, ld.Value, ld.Fence, last.Value, last.Fence)
			}
			last = ld
		}
	})
	for time.Now().Before(w.end) && !w.isClosed(li) {
		from := w.chk.now()
		ld, err := e.Leader(ctx)
		s := leaderSeen{g: g, from: from, to: w.chk.now(), ld: ld}
		switch {
		case errors.Is(err, padlock.ErrNoLeader):
			s.none = true
			w.chk.leader(s)
		case err == nil:
			w.tr.Add("%s leader %q fence %d", g, ld.Value, ld.Fence)
			w.chk.leader(s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
}
