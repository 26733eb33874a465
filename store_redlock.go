package padlock

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
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
// How locks are taken, kept and let go, the delayed-restart rule, what a
// failure reports and why there are no fences: see "Redlock" in the
// package documentation.
//
// The node timeout is a context deadline, which go-redis applies to the
// socket only when a client has ContextTimeoutEnabled set; NewRedlock
// requires that, or read and write timeouts no longer than the node
// timeout, so that one hung node cannot stall every Acquire for seconds.
// It takes clients rather than addresses so that each node keeps the
// dialer, TLS, credentials and pool settings its operator needs (or a
// Sentinel failover client), which a list of addresses could not carry;
// the one setting it needs is named in the error when it is missing, and
// the example shows it. NewRedlock adds a hook to each client to
// see new connections; it stays after Close, and costs nothing then.
//
// NewRedlock follows the constructors' rule (see "Constructors" in the
// package documentation): it panics, with an ErrInvalid error naming the
// problem, on what the program's code gets wrong: an invalid option, or a
// nil, repeated or unsuitable client (a Cluster or Ring client is a whole
// deployment, not one node: use New). It returns an ErrInvalid error for
// what a deployment's configuration decides: no clients at all, two
// clients that reach the same address, or a client whose socket waits are
// not bounded as above (naming ContextTimeoutEnabled; read and write
// timeouts come from configuration too, as go-redis ParseURL's
// read_timeout and write_timeout).
func NewRedlock(clients []redis.UniversalClient, opts ...RedlockOption) (*Locker, error) {
	cfg, err := redlockConfig(opts)
	if err != nil {
		panic(err)
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
			panic(invalid(field, "is nil"))
		}
		if j := slices.Index(clients[:i], c); j >= 0 {
			panic(invalid(field, "is clients[%d] again; each node may vote only once", j))
		}
		addr, err := checkNodeClient(c, cfg.nodeTimeout)
		if errors.Is(err, errUnboundedWaits) {
			// Read and write timeouts come from configuration as often as
			// from code (go-redis ParseURL's read_timeout and
			// write_timeout): a deployment's error, returned.
			return nil, invalid(field, "%v", err)
		}
		if err != nil {
			panic(invalid(field, "%v", err))
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

// errUnboundedWaits is checkNodeClient's error for a client whose socket
// waits outlast the node timeout.
var errUnboundedWaits = errors.New("socket waits not bounded by the node timeout")

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
			return "", fmt.Errorf("%w: set ContextTimeoutEnabled (or ReadTimeout and WriteTimeout of at most the node timeout %v, got %v and %v): "+
				"go-redis ignores context deadlines on the socket otherwise, so a hung node would stall every Acquire",
				errUnboundedWaits, timeout, o.ReadTimeout, o.WriteTimeout)
		}
		if isFailover(o) {
			return "", nil
		}
		return o.Addr, nil
	}
	return "", nil
}
