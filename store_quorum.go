package padlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redlockAcquireScript takes a lock on one Redlock node.
var redlockAcquireScript = newScript(grantLua + luaFile("redlock_acquire.lua"))

// quorum is the store of a Redlock Locker: independent nodes, of which need
// must agree. Every request goes to all nodes at once and waits for each
// at most timeout; no goroutine outlives the request.
type quorum struct {
	nodes   []*node
	need    int // a majority: len(nodes)/2 + 1
	timeout time.Duration
	margin  func(ttl time.Duration) time.Duration
	obs     Observer // WithObserver: told each request's votes
}

// node is one Redlock node.
type node struct {
	client redis.UniversalClient
	s      single // the node's own store, for what needs no quorum logic
	addr   string // for error messages
	guard  restartGuard
}

// each runs f for every node at once, under the node timeout, and returns
// when all have returned. The nodes share one deadline: they all start
// together, and one timer is cheaper than one per node.
func (q *quorum) each(ctx context.Context, f func(ctx context.Context, i int, n *node)) {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, n := range q.nodes[1:] {
		wg.Go(func() { f(ctx, i+1, n) })
	}
	f(ctx, 0, q.nodes[0]) // this goroutine would only wait otherwise
	wg.Wait()
}

func (q *quorum) acquire(ctx context.Context, id *lockID, _ *attempt) (grant, error) {
	if !id.claim() {
		return grant{}, errTokenReused
	}
	if id.fair {
		// A queue on every node would need its own quorum protocol.
		return grant{}, invalid("Options.Fair", "not supported by a Redlock Locker")
	}
	start := time.Now()
	votes := make([]vote, len(q.nodes))
	q.each(ctx, func(ctx context.Context, i int, n *node) { votes[i] = n.acquire(ctx, id) })
	elapsed := time.Since(start)

	t := q.count(votes)
	q.observeVotes("acquire", votes, t.yes)
	ttl := id.ttl
	valid := ttl - q.margin(ttl)
	if t.yes >= q.need && elapsed < valid {
		// Any positive fence tells the Locker it has the lock; Lock.Fence
		// reports 0 on a Redlock Locker, which never hands locks on.
		return grant{first: 1, last: 1}, nil
	}
	q.undo(ctx, id, votes)
	switch {
	case t.yes >= q.need:
		e := q.failure("acquire", votes)
		e.Late = elapsed - valid
		e.late = fmt.Sprintf("after %v, beyond the %v the lease of %v leaves", elapsed.Round(time.Millisecond), valid, ttl)
		return grant{}, withCause(ctx, e)
	case t.no > len(q.nodes)-q.need:
		// Busy, but the attempt may have taken nodes that were free, and
		// undo sent them a clean-up, either of which may run late: the
		// next attempt's token is its own (mintID), so they find a
		// stranger there.
		return grant{holderTTL: q.holderTTL(votes, t.no), holder: holderOf(votes)}, nil
	}
	return grant{}, withCause(ctx, q.failure("acquire", votes))
}

// undo releases a failed attempt on every node that may hold it: all but
// those that said someone else holds the lock. It runs even when ctx has
// ended, so a cancelled Acquire leaves nothing behind for a whole lease.
func (q *quorum) undo(ctx context.Context, id *lockID, votes []vote) {
	ctx = context.WithoutCancel(ctx)
	q.each(ctx, func(ctx context.Context, i int, n *node) {
		if !votes[i].busy {
			_, _ = n.s.release(ctx, id, giveBack{notify: true})
		}
	})
}

// acquire asks n to grant the lock to id.
func (n *node) acquire(ctx context.Context, id *lockID) vote {
	sent := time.Now()
	g, err := grantOf(redlockAcquireScript.run(ctx, n.client, 0, id.keys[:1], id.argv[:]...).Result())
	switch {
	case err != nil:
		return vote{err: n.wrap(err)}
	case g.first == 0:
		return vote{busy: true, holderTTL: g.holderTTL, holder: g.holder}
	}
	v, err := n.guard.counts(ctx, n.client, sent)
	if err != nil {
		return vote{restarting: true, err: n.wrap(fmt.Errorf("restart check: %w", err))}
	}
	return vote{yes: v.counts, restarting: !v.counts, holderTTL: v.wait, why: v.why}
}

func (n *node) wrap(err error) error { return &nodeError{addr: n.addr, err: err} }

func (q *quorum) release(ctx context.Context, id *lockID, _ giveBack) (bool, error) {
	votes := make([]vote, len(q.nodes))
	q.each(ctx, func(ctx context.Context, i int, n *node) {
		// Redlock waiters do not mark the lock (redlock_acquire.lua):
		// always publish.
		ok, err := n.s.release(ctx, id, giveBack{notify: true})
		votes[i] = vote{yes: ok, err: n.wrapNil(err)}
	})
	ok, err := q.decide("release", votes, 0)
	return ok, withCause(ctx, err)
}

// extend needs a majority within the validity of the new lease. The
// restart rule does not apply: a node can only extend a token it holds,
// which another owner then cannot take there.
func (q *quorum) extend(ctx context.Context, id *lockID, ttl time.Duration, seq uint64) (bool, error) {
	start := time.Now()
	votes := make([]vote, len(q.nodes))
	q.each(ctx, func(ctx context.Context, i int, n *node) {
		ok, err := n.s.extend(ctx, id, ttl, seq)
		votes[i] = vote{yes: ok, err: n.wrapNil(err)}
	})
	ok, err := q.decide("extend", votes, q.late(start, ttl))
	return ok, withCause(ctx, err)
}

// resume needs a majority to hand the lock over, within the validity of
// the new lease, as extend does.
func (q *quorum) resume(ctx context.Context, token string, id *lockID) (bool, error) {
	start := time.Now()
	ttl := id.ttl
	votes := make([]vote, len(q.nodes))
	q.each(ctx, func(ctx context.Context, i int, n *node) {
		ok, err := n.s.resume(ctx, token, id)
		votes[i] = vote{yes: ok, err: n.wrapNil(err)}
	})
	ok, err := q.decide("resume", votes, q.late(start, ttl))
	return ok, withCause(ctx, err)
}

// handover is never asked for: a Redlock Locker does not hand locks on.
func (q *quorum) handover(context.Context, *lockID, *lockID, time.Duration, uint64) (bool, error) {
	return false, errors.New("padlock: a Redlock Locker does not hand locks on")
}

// handoverFair is never asked for: a Redlock Locker has no fair queues.
func (q *quorum) handoverFair(context.Context, *lockID, *lockID, string, time.Duration, uint64) (int64, bool, error) {
	return 0, false, errors.New("padlock: a Redlock Locker does not hand locks on")
}

// leaveQueue has nothing to do: a Redlock Locker has no fair queues.
func (q *quorum) leaveQueue(context.Context, *lockID, string) error { return nil }

func (q *quorum) pttl(ctx context.Context, id *lockID) (time.Duration, bool, error) {
	start := time.Now()
	votes := make([]vote, len(q.nodes))
	q.each(ctx, func(ctx context.Context, i int, n *node) {
		d, ok, err := n.s.pttl(ctx, id)
		votes[i] = vote{yes: ok, holderTTL: d, err: n.wrapNil(err)}
	})
	if ok, err := q.decide("ttl", votes, 0); !ok || err != nil {
		return 0, ok, withCause(ctx, err)
	}
	// The lock stands while a majority holds it: until the need-th longest
	// lease ends.
	leases := make([]time.Duration, 0, len(votes))
	for _, v := range votes {
		if v.yes {
			leases = append(leases, v.holderTTL)
		}
	}
	slices.Sort(leases)
	return max(leases[len(leases)-q.need]-time.Since(start), 0), true, nil
}

// renew sends the whole batch to every node at once, one pipelined round
// trip per node, and judges each renewal by its majority. The node timeout
// bounds the wait, so the batch is settled once, as a whole.
func (q *quorum) renew(ctx context.Context, batch []renewal, settled func(idx []int)) {
	start := time.Now()
	answers := make([][]renewal, len(q.nodes))
	q.each(ctx, func(ctx context.Context, i int, n *node) {
		b := make([]renewal, len(batch))
		for j, r := range batch {
			b[j] = renewal{id: r.id, ttl: r.ttl, deadline: r.deadline, seq: r.seq}
		}
		n.s.renew(ctx, b, func([]int) {})
		answers[i] = b
	})
	votes := make([]vote, len(q.nodes))
	for j := range batch {
		for i, b := range answers {
			votes[i] = vote{yes: b[j].ok, err: q.nodes[i].wrapNil(b[j].err)}
		}
		r := &batch[j]
		r.ok, r.err = q.decide("renew", votes, q.late(start, r.ttl))
	}
	all := make([]int, len(batch))
	for i := range all {
		all[i] = i
	}
	settled(all)
}

// late returns how far past the validity of a lease of ttl, sent at start,
// the answers came (0 or less: in time).
func (q *quorum) late(start time.Time, ttl time.Duration) time.Duration {
	return time.Since(start) - (ttl - q.margin(ttl))
}

func (n *node) wrapNil(err error) error {
	if err == nil {
		return nil
	}
	return n.wrap(err)
}
