package padlock

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock/internal/explore"
)

// bubble is an in-memory Redis on the virtual clock of a testing/synctest
// bubble (internal/explore's server, with no faults), for the tests of
// package padlock that wait for leases, renewals and backoffs: they run
// there exactly as written, whatever the machine's load, and seconds of
// leases take milliseconds. It is bubble_test.go's bubble, with a
// Cluster in memory beside the one server (explore.Cluster: no sharded
// pub/sub, so its waiters wake on their timers). What only a real
// redis-server shows stays on one. A bubble test must not call
// t.Parallel: two bubbles at once in one process are fatal (go-redis
// keeps a process-wide pool of timers).
type bubble struct {
	t        *testing.T
	srv      *explore.Server
	tr       *explore.Trace
	late     sync.WaitGroup
	clusters []*explore.Cluster
	closers  []func()
	lockers  []*Locker
}

// inBubble runs f in a synctest bubble with a fresh in-memory Redis, and
// closes every Locker, client and server f made when it ends. The
// bubble's own clean-up is t's first, so it runs last: a Locker that f
// closes with t.Cleanup (mustNew's callers do) is closed before its
// client.
func inBubble(t *testing.T, f func(t *testing.T, b *bubble)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		b := &bubble{t: t, tr: explore.NewTrace()}
		b.srv = explore.NewServer("redis", b.tr)
		t.Cleanup(b.close) // on t.Fatal too, or the bubble's goroutines outlive it
		f(t, b)
	})
}

// close closes what the bubble's test made.
func (b *bubble) close() {
	for _, l := range b.lockers {
		_ = l.Close()
	}
	b.late.Wait()
	for _, c := range b.closers {
		c()
	}
	b.srv.Close()
	for _, c := range b.clusters {
		c.Close()
	}
}

// client returns a new client of the bubble's Redis, with no faults but
// the server's pauses (a fault layer of rate 0), and with
// ContextTimeoutEnabled, as padlock.New requires.
func (b *bubble) client() *redis.Client {
	i := len(b.closers)
	c, h := explore.NewClient(i, fmt.Sprintf("C%d", i), b.srv, b.plan(), b.tr, &b.late)
	b.closers = append(b.closers, func() { h.CloseSide(); _ = c.Close() })
	return c
}

// locker returns a Locker on client (closed when the bubble ends). A
// microsecond passes as each of its releases begins: on a real machine
// time always moves between a release's start and the rename that hands
// the lock on, which must be sent after it (wait_handoff.go); on the
// bubble's clock nothing moves until something sleeps, and no lock
// would ever be handed on.
func (b *bubble) locker(client redis.UniversalClient, opts ...LockerOption) *Locker {
	b.t.Helper()
	l := mustNew(b.t, client, opts...)
	l.confirming = func() { time.Sleep(time.Microsecond) }
	b.lockers = append(b.lockers, l)
	return l
}

// cluster starts a Cluster of n masters in memory and returns a function
// that makes a new client of it.
func (b *bubble) cluster(n int) func() redis.UniversalClient {
	c := explore.NewCluster(n, b.tr)
	b.clusters = append(b.clusters, c)
	return func() redis.UniversalClient {
		i := len(b.closers) * 16
		cc, hooks := c.NewClient(i, fmt.Sprintf("C%d", i), b.plan(), b.tr, &b.late)
		b.closers = append(b.closers, func() {
			for _, h := range hooks {
				h.CloseSide()
			}
			_ = cc.Close()
		})
		return cc
	}
}

// bubbleBackends are holdBackends in a bubble: one server, and a
// 3-master Cluster, in memory.
var bubbleBackends = []struct {
	name  string
	start func(b *bubble) func() redis.UniversalClient
}{
	{"single", func(b *bubble) func() redis.UniversalClient {
		return func() redis.UniversalClient { return b.client() }
	}},
	{"cluster", func(b *bubble) func() redis.UniversalClient { return b.cluster(3) }},
}

// plan is the fault layer's plan for the bubble's clients: no faults,
// and a round trip of a millisecond, as on any network, so that the
// clocks of the commands a test sends one after another differ (fences
// rise with the server's clock).
func (b *bubble) plan() *explore.Plan {
	return &explore.Plan{ContextTimeout: true, Latency: time.Millisecond}
}
