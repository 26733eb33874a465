package padlock_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/explore"
)

// bubble is an in-memory Redis on the virtual clock of a testing/synctest
// bubble (internal/explore's server, with no faults): a test of the
// watchdog's timing, leases and renewals, runs there exactly as written,
// whatever the machine's load, and a 3-second scenario takes a few
// milliseconds. What only a real redis-server shows stays on one.
type bubble struct {
	t       *testing.T
	srv     *explore.Server
	nodes   []*explore.Server // Redlock's, beside srv
	tr      *explore.Trace
	late    sync.WaitGroup
	clients []*redis.Client
	hooks   []*explore.Hook
	lockers []*padlock.Locker
}

// inBubble runs f in a synctest bubble with a fresh in-memory Redis, and
// closes every Locker and client f made when it returns.
func inBubble(t *testing.T, f func(t *testing.T, b *bubble)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		b := &bubble{t: t, tr: explore.NewTrace()}
		b.srv = explore.NewServer("redis", b.tr)
		defer b.close() // on t.Fatal too, or the bubble's goroutines outlive it
		f(t, b)
	})
}

// close closes what the bubble's test made.
func (b *bubble) close() {
	for _, l := range b.lockers {
		_ = l.Close()
	}
	b.late.Wait()
	for i, c := range b.clients {
		b.hooks[i].CloseSide()
		_ = c.Close()
	}
	b.srv.Close()
	for _, s := range b.nodes {
		s.Close()
	}
}

// client returns a new client of the bubble's Redis, with no faults and
// with ContextTimeoutEnabled, as padlock.New requires.
func (b *bubble) client() *redis.Client { return b.clientOf(b.srv) }

// clientOf returns a new client of srv, as client does.
func (b *bubble) clientOf(srv *explore.Server) *redis.Client {
	i := len(b.clients)
	c, h := explore.NewClient(i, fmt.Sprintf("C%d", i), srv, &explore.Plan{ContextTimeout: true}, b.tr, &b.late)
	h.Off()
	b.clients, b.hooks = append(b.clients, c), append(b.hooks, h)
	return c
}

// locker returns a Locker on a new client of the bubble's Redis, and the
// client.
func (b *bubble) locker(opts ...padlock.LockerOption) (*padlock.Locker, *redis.Client) {
	c := b.client()
	l := padlock.MustNew(b.t, c, opts...)
	b.lockers = append(b.lockers, l)
	return l, c
}

// redlock returns a Redlock Locker on n new in-memory nodes, and the
// nodes. Each node has been up for an hour, so it votes at once: what
// the real nodes of the Redlock tests wait seconds for.
func (b *bubble) redlock(n int, opts ...padlock.RedlockOption) (*padlock.Locker, []*explore.Server) {
	nodes := make([]*explore.Server, n)
	for i := range nodes {
		nodes[i] = explore.NewServer(fmt.Sprintf("n%d", len(b.nodes)), b.tr)
		// An address of its own: Redlock refuses a node named twice.
		nodes[i].Addr = fmt.Sprintf("127.0.0.1:%d", 6380+len(b.nodes))
		b.nodes = append(b.nodes, nodes[i])
	}
	return b.redlockOn(nodes, opts...), nodes
}

// redlockOn returns a Redlock Locker on nodes, with clients of its own
// (another process, as far as Redis can tell) and the max lease, node
// timeout and TTL of the tests on real nodes (redlockOn).
func (b *bubble) redlockOn(nodes []*explore.Server, opts ...padlock.RedlockOption) *padlock.Locker {
	clients := make([]redis.UniversalClient, len(nodes))
	for i, s := range nodes {
		clients[i] = b.clientOf(s)
	}
	opts = append([]padlock.RedlockOption{
		padlock.WithMaxLease(rlMaxLease),
		padlock.WithNodeTimeout(rlNodeTimeout),
		padlock.WithDefaults(padlock.Options{TTL: rlMaxLease}),
	}, opts...)
	l, err := padlock.NewRedlock(clients, opts...)
	if err != nil {
		b.t.Fatalf("NewRedlock: %v", err)
	}
	b.lockers = append(b.lockers, l)
	return l
}
