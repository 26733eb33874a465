package padlock_test

import (
	"fmt"
	"slices"
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
