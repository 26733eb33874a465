package padlock

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// How the answers of a Redlock Locker's nodes add up: each node's vote,
// their tally, and the quorum's decision and error.

// vote is one node's answer to a request.
type vote struct {
	yes        bool          // granted, extended, released or held, as the request asks
	restarting bool          // granted, but by a node too recently (re)started to count
	busy       bool          // someone else holds the lock there (acquire)
	holderTTL  time.Duration // the other holder's lease there, when busy; until the node votes, when restarting
	holder     string        // the other holder's Options.Owner there, when busy and it set one
	err        error         // no answer, or an error reply
	why        error         // restarting under WithPersistentNodes: why the rule applies all the same
}

// tally counts votes.
type tally struct {
	yes, no    int // no: answered, and not yes (busy for acquire)
	restarting int
}

func (q *quorum) count(votes []vote) tally {
	var t tally
	for _, v := range votes {
		switch {
		case v.yes:
			t.yes++
		case v.restarting:
			t.restarting++
		case v.err == nil:
			t.no++
		}
	}
	return t
}

// decide turns the votes on a lock the caller holds into the store's
// answer: ok when a majority said yes (in time, when late > 0 says they
// did not), not ok when more nodes said no than a majority can spare, and
// an error when too few answered to tell.
func (q *quorum) decide(op string, votes []vote, late time.Duration) (bool, error) {
	t := q.count(votes)
	q.observeVotes(op, votes, t.yes)
	switch {
	case t.yes >= q.need && late > 0:
		e := q.failure(op, votes)
		e.Late, e.late = late, fmt.Sprintf("%v too late for the lease", late.Round(time.Millisecond))
		return false, e
	case t.yes >= q.need:
		return true, nil
	case t.no > len(q.nodes)-q.need:
		return false, nil
	}
	return false, q.failure(op, votes)
}

// failure returns the error of a request the votes did not carry, with
// each node's outcome.
func (q *quorum) failure(op string, votes []vote) *QuorumError {
	e := &QuorumError{Op: op, Need: q.need, Nodes: make([]NodeResult, len(votes))}
	for i, v := range votes {
		r := NodeResult{Index: i, Addr: q.nodes[i].addr}
		switch {
		case v.err != nil:
			r.Err = v.err
			var ne *nodeError
			if errors.As(v.err, &ne) {
				r.Err = ne.err // the result names the node already
			}
			r.Outcome = outcomeOf(r.Err)
		case v.yes:
			r.Outcome = NodeAgreed
		case v.restarting:
			r.Outcome, r.Wait, r.Err = NodeRestarting, v.holderTTL, v.why
		case v.busy:
			r.Outcome, r.Wait = NodeBusy, v.holderTTL
		default:
			r.Outcome = NodeNotHeld
		}
		e.Nodes[i] = r
	}
	return e
}

// holderOf returns the Options.Owner most busy nodes name ("" when none
// does; the first named of those tied). Nodes may name different holders:
// one whose lock half the nodes still keep, and one who took the others.
func holderOf(votes []vote) string {
	best, most := "", 0
	for i, v := range votes {
		if !v.busy || v.holder == "" {
			continue
		}
		n := 0
		for _, w := range votes[i:] {
			if w.busy && w.holder == v.holder {
				n++
			}
		}
		if n > most {
			best, most = v.holder, n
		}
	}
	return best
}

// holderTTL returns how long until enough of the busy nodes' leases end
// for a majority to be free: with busy nodes of which at most len-need may
// stay busy, the (busy-(len-need))-th shortest lease.
func (q *quorum) holderTTL(votes []vote, busy int) time.Duration {
	leases := make([]time.Duration, 0, busy)
	for _, v := range votes {
		if v.busy {
			leases = append(leases, v.holderTTL)
		}
	}
	slices.Sort(leases)
	return leases[busy-(len(q.nodes)-q.need)-1]
}
