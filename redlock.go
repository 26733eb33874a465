package padlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultNodeTimeout is how long a Redlock Locker waits for one node to
// answer, unless WithNodeTimeout says otherwise.
const DefaultNodeTimeout = 100 * time.Millisecond

var (
	//go:embed redlock_acquire.lua
	redlockAcquireLua    string
	redlockAcquireScript = newScript(redlockAcquireLua)
)

// NewRedlock returns a Locker whose locks are held by a majority of
// independent Redis masters, following the Redlock algorithm of the Redis
// documentation: locking goes on while a minority of the nodes is down,
// hung or cut off.
//
// Each client must reach its own master that shares nothing with the others
// (no replication between them, not one Cluster). With n clients a lock needs
// n/2+1 nodes: 3 nodes survive the loss of 1, 5 the loss of 2. One or two
// clients are allowed, but then no node may fail. The Locker does not own
// the clients: close them after closing the Locker.
//
// How locks are taken, kept and let go:
//
//   - Acquire asks every node at once, not one after another, and waits for
//     each at most the node timeout (WithNodeTimeout, default 100ms). The
//     lock is taken when a majority granted it and the lease left after the
//     round trip, TTL − elapsed − drift (WithClockDrift, default 1% of TTL
//     plus 2ms), is still positive. Otherwise the attempt is undone on every
//     node that may hold it, those that did not answer in time included.
//     When too many nodes are held by another owner, Acquire fails with
//     ErrNotAcquired, and the holder's remaining lease it reports is the time
//     until enough of those nodes' leases end for a majority to be free.
//     When too few nodes answer, the error matches both ErrNotAcquired and
//     ErrUnavailable.
//   - Extend and the background renewal need a majority of nodes to reset
//     the lease, within that same validity. When more nodes than a majority
//     can spare say the lock is gone, it is lost at once (Done closes); when
//     too few answer, renewal is tried again until the trusted lease runs
//     out, and the lock is lost then.
//   - Release deletes the lock on every node that answers. It returns nil
//     when a majority still held it; ErrNotHeld when more nodes than a
//     majority can spare no longer did (the lock had been lost, and another
//     owner may have held it meanwhile); and an ErrUnavailable error when
//     too few nodes answered to tell. The nodes that did not answer let the
//     lock go when its lease ends.
//   - Lock.TTL reports how long a majority of nodes still holds the lock.
//
// Delayed restart: a node that restarts without persistence forgets the
// locks it held, and would grant one again at once while its owner still
// holds it on other nodes. So a node's grants do not count until it has
// been up for the max lease (WithMaxLease; default the Locker's default
// TTL, 30s unless WithDefaults sets another), by when every lease it may
// have forgotten has run out. Acquire and Extend reject a longer TTL with
// ErrInvalid. Which process a node runs, and since when, is read (INFO
// server) after a new connection to it was made, not on every Acquire: a
// restart always breaks the connections, so a node is checked again
// exactly when it may have restarted. A process the client sees replace
// one it saw before (a new run_id) votes a max lease after the client
// first saw it, on the client's monotonic clock; only a process the client
// sees first is judged by its uptime_in_seconds, which Redis derives from
// the wall clock, so a clock stepped forward between its start and the
// client's first look lets it vote early. Uptime comes in whole seconds, so
// a node votes a second or two after the max lease. Locking goes on
// meanwhile while a majority of the other nodes is up; a freshly started
// set of nodes grants its first lock only that long after starting, and
// until then Acquire fails with a QuorumError naming each waiting node and
// how long it still waits (NodeRestarting). Nodes that persist every write
// before answering need no wait: see WithPersistentNodes. Clients must be
// allowed INFO.
//
// A Redlock failure says what each node did: the error wraps a
// *QuorumError (errors.As) whose Nodes give each node's outcome (agreed,
// busy, not held, restarting, timeout, unreachable, error reply). A node
// that timed out does not make the error match context.DeadlineExceeded;
// only the caller's own context ending does.
//
// Fences: Lock.Fence returns 0 on a Redlock Locker. Each node could count
// acquisitions, but counters on independent nodes do not add up to one
// sequence that only grows (two owners that never overlapped can get their
// fences in either order), and a fence that is not monotonic protects
// nothing. Fencing needs one Redis deployment (New) or a consensus system.
//
// The node timeout is a context deadline, which go-redis applies to the
// socket only when a client has ContextTimeoutEnabled set; NewRedlock
// requires that, or read and write timeouts no longer than the node
// timeout, so that one hung node cannot stall every Acquire for seconds.
// It takes clients rather than addresses so that each node keeps the
// dialer, TLS, credentials and pool settings its operator needs (or a
// Sentinel failover client), which a list of addresses could not carry;
// the one setting it needs is named in the error when it is missing, and
// the package example shows it. NewRedlock adds a hook to each client to
// see new connections; it stays after Close, and costs nothing then.
//
// NewRedlock returns an ErrInvalid error naming the problem when clients is
// empty or has a nil, repeated or unsuitable client (a Cluster or Ring
// client is a whole deployment, not one node: use New), or when an option
// is invalid (WithReplicaAck is for New only).
func NewRedlock(clients []redis.UniversalClient, opts ...Option) (*Locker, error) {
	cfg := defaultConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	cfg.redlock = true
	if cfg.nodeTimeout == 0 {
		cfg.nodeTimeout = DefaultNodeTimeout
	}
	if cfg.maxLease == 0 {
		cfg.maxLease = Options{}.withDefaults(cfg.defaults).TTL
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(clients) == 0 {
		return nil, invalid("NewRedlock", "no clients; Redlock needs 3 or more independent masters to survive the loss of one")
	}
	q := &quorum{
		nodes:   make([]*node, len(clients)),
		need:    len(clients)/2 + 1,
		timeout: cfg.nodeTimeout,
		margin:  cfg.margin,
		obs:     cfg.observer,
	}
	addrs := make(map[string]int, len(clients))
	for i, c := range clients {
		field := fmt.Sprintf("NewRedlock: clients[%d]", i)
		if c == nil {
			return nil, invalid(field, "is nil")
		}
		if j := slices.Index(clients[:i], c); j >= 0 {
			return nil, invalid(field, "is clients[%d] again; each node may vote only once", j)
		}
		addr, err := checkNodeClient(c, cfg.nodeTimeout)
		if err != nil {
			return nil, invalid(field, "%v", err)
		}
		if addr != "" {
			if j, dup := addrs[addr]; dup {
				return nil, invalid(field, "reaches %s like clients[%d]; each node may vote only once", addr, j)
			}
			addrs[addr] = i
		} else {
			addr = fmt.Sprintf("node %d", i)
		}
		q.nodes[i] = &node{client: c, s: singleOn(c).failingFast(), addr: addr, guard: restartGuard{maxLease: cfg.maxLease, persistent: cfg.persistent}}
	}
	// Only now that nothing can fail: an error leaves the clients as they were.
	for _, n := range q.nodes {
		n.client.AddHook(&n.guard)
	}
	// Release notices come from the first node: every release publishes on
	// every node, and a waiter that hears none falls back to its timers.
	return newLocker(q, clients[0], keyspace{prefix: cfg.prefix}, cfg), nil
}

// checkNodeClient says why c cannot be a Redlock node, or returns the
// address it reaches ("" when that is not known, as for a failover client
// whose master changes).
func checkNodeClient(c redis.UniversalClient, timeout time.Duration) (string, error) {
	switch c := c.(type) {
	case *redis.ClusterClient:
		return "", errors.New("is a Cluster client, a whole deployment rather than one node; use New for a Cluster")
	case *redis.Ring:
		return "", errors.New("is a Ring client, which shards keys over several nodes; pass one client per node")
	case *redis.Client:
		o := c.Options()
		bounded := func(d time.Duration) bool { return d > 0 && d <= timeout }
		if !o.ContextTimeoutEnabled && !(bounded(o.ReadTimeout) && bounded(o.WriteTimeout)) {
			return "", fmt.Errorf("set ContextTimeoutEnabled (or ReadTimeout and WriteTimeout of at most the node timeout %v, got %v and %v): "+
				"go-redis ignores context deadlines on the socket otherwise, so a hung node would stall every Acquire",
				timeout, o.ReadTimeout, o.WriteTimeout)
		}
		if o.Addr == "FailoverClient" { // go-redis's name for a Sentinel-managed master
			return "", nil
		}
		return o.Addr, nil
	}
	return "", nil
}

// WithNodeTimeout sets how long a Redlock Locker (NewRedlock) waits for one
// node to answer one request: every node gets the same deadline, counted
// from when the request went out to all of them. A node that answers later
// counts as down. Keep it far below the TTL: it is part of the lease that
// an Acquire may use up. Default: 100ms (DefaultNodeTimeout). New rejects
// it.
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) { c.nodeTimeout = d }
}

// WithMaxLease sets the longest lease any owner sets on the nodes of a
// Redlock Locker (NewRedlock): Acquire and Extend reject a longer TTL, and a
// node that restarted does not vote until it has been up this long (see
// NewRedlock). Give every Locker that shares the nodes the same value. Below
// 30s, set a default TTL within it too (WithDefaults), or every Acquire must
// name its TTL. Default: the Locker's default TTL (30s unless WithDefaults
// sets another). New rejects it.
func WithMaxLease(d time.Duration) Option {
	return func(c *config) { c.maxLease = d }
}

// WithPersistentNodes tells a Redlock Locker (NewRedlock) that its nodes
// write every command to disk before they answer (appendonly yes with
// appendfsync always), so that a node that restarts still holds every
// lock it granted, and its grants count at once instead of after the max
// lease (the delayed-restart rule, see NewRedlock). A new deployment then
// takes locks as soon as its nodes are up.
//
// Where the clients may run CONFIG GET, each node's settings are checked
// whenever the restart rule would read its uptime (after the client
// dialled it anew), and a node that does not persist every write is held
// to the rule all the same; its result in a QuorumError says why. Where
// CONFIG GET is refused (managed Redis, ACLs), the option is the caller's
// promise: a node that breaks it may, after a restart, grant a lock its
// old process had granted to another owner. Other ways to lose writes
// break it too: a restore from an older snapshot, a disk that lies about
// fsync, or a wall clock stepped forward across the restart (Redis stores
// lease ends as wall-clock times in the AOF). Default: off. New rejects
// it.
func WithPersistentNodes() Option {
	return func(c *config) { c.persistent = true }
}

// validateModes checks the options that belong to one kind of Locker: the
// Redlock ones with NewRedlock, the replica ones with New.
func (c config) validateModes() error {
	if !c.redlock {
		switch {
		case c.nodeTimeout != 0:
			return invalid("WithNodeTimeout", "applies to NewRedlock only")
		case c.maxLease != 0:
			return invalid("WithMaxLease", "applies to NewRedlock only")
		case c.persistent:
			return invalid("WithPersistentNodes", "applies to NewRedlock only")
		}
		return c.validateReplicaAck()
	}
	switch {
	case c.ackReplicas != 0 || c.ackTimeout != 0:
		return invalid("WithReplicaAck", "applies to New only; Redlock survives the loss of a node by its majority instead")
	case c.nodeTimeout <= 0:
		return invalid("WithNodeTimeout", "must be positive, got %v", c.nodeTimeout)
	case c.maxLease < time.Millisecond:
		return invalid("WithMaxLease", "must be at least 1ms, got %v", c.maxLease)
	case c.nodeTimeout >= c.maxLease:
		return invalid("WithNodeTimeout", "must be shorter than the max lease %v, got %v", c.maxLease, c.nodeTimeout)
	case c.defaults.Fair:
		return invalid("WithDefaults", "Fair is not supported by NewRedlock")
	case c.defaults.TTL > c.maxLease:
		return invalid("WithDefaults", "TTL %v exceeds the max lease %v (WithMaxLease)", c.defaults.TTL, c.maxLease)
	}
	return nil
}

// checkLease rejects a lease longer than a Redlock Locker's max lease; field
// names the argument that set it.
func (c config) checkLease(field string, ttl time.Duration) error {
	if c.maxLease > 0 && ttl > c.maxLease {
		return invalid(field, "%v exceeds the max lease %v of this Redlock Locker (WithMaxLease)", ttl, c.maxLease)
	}
	return nil
}

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

// vote is one node's answer to a request.
type vote struct {
	yes        bool          // granted, extended, released or held, as the request asks
	restarting bool          // granted, but by a node too recently (re)started to count
	busy       bool          // someone else holds the lock there (acquire)
	holderTTL  time.Duration // the other holder's lease there, when busy; until the node votes, when restarting
	err        error         // no answer, or an error reply
	why        error         // restarting under WithPersistentNodes: why the rule applies all the same
}

func (q *quorum) acquire(ctx context.Context, id *lockID, _ *attempt) (grant, error) {
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
	ttl := leaseOf(id)
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
		return grant{holderTTL: q.holderTTL(votes, t.no)}, nil
	}
	return grant{}, withCause(ctx, q.failure("acquire", votes))
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
	r, err := redlockAcquireScript.run(ctx, n.client, 0, id.keys[:1], id.argv[:]...).Int64()
	switch {
	case err != nil:
		return vote{err: n.wrap(err)}
	case r < 0:
		return vote{busy: true, holderTTL: time.Duration(-1-r) * time.Millisecond}
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
func (q *quorum) extend(ctx context.Context, id *lockID, ttl time.Duration) (bool, error) {
	start := time.Now()
	votes := make([]vote, len(q.nodes))
	q.each(ctx, func(ctx context.Context, i int, n *node) {
		ok, err := n.s.extend(ctx, id, ttl)
		votes[i] = vote{yes: ok, err: n.wrapNil(err)}
	})
	ok, err := q.decide("extend", votes, q.late(start, ttl))
	return ok, withCause(ctx, err)
}

// resume needs a majority to hand the lock over, within the validity of
// the new lease, as extend does.
func (q *quorum) resume(ctx context.Context, token string, id *lockID) (bool, error) {
	start := time.Now()
	ttl := leaseOf(id)
	votes := make([]vote, len(q.nodes))
	q.each(ctx, func(ctx context.Context, i int, n *node) {
		ok, err := n.s.resume(ctx, token, id)
		votes[i] = vote{yes: ok, err: n.wrapNil(err)}
	})
	ok, err := q.decide("resume", votes, q.late(start, ttl))
	return ok, withCause(ctx, err)
}

// leaveQueue has nothing to do: a Redlock Locker has no fair queues.
func (q *quorum) leaveQueue(context.Context, *lockID) error { return nil }

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
			b[j] = renewal{id: r.id, ttl: r.ttl, deadline: r.deadline}
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

func (n *node) wrapNil(err error) error {
	if err == nil {
		return nil
	}
	return n.wrap(err)
}

// leaseOf returns the lease an Acquire for id asks for.
func leaseOf(id *lockID) time.Duration {
	ms, _ := id.argv[1].(int64)
	return time.Duration(ms) * time.Millisecond
}
