package padlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestRedlockMutualExclusion(t *testing.T) {
	t.Parallel()
	l1, servers := startRedlock(t, 5)
	l2 := redlockOn(t, servers)
	awaitVotes(t, l2)
	ctx := ctxFor(t)
	key := testKey(t)

	const workers, rounds = 20, 5
	var inside atomic.Int32 // owners inside the critical section
	var wg sync.WaitGroup
	for w := range workers {
		l := l1
		if w%2 == 1 {
			l = l2
		}
		wg.Go(func() {
			for range rounds {
				lk, err := l.Acquire(ctx, key, padlock.Options{Wait: 20 * time.Second})
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d owners at once, want 1", n)
				}
				time.Sleep(time.Millisecond) // widen the window
				inside.Add(-1)
				if err := lk.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
}

func TestRedlockBusy(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 5)
	other := redlockOn(t, servers)
	awaitVotes(t, other)
	ctx := ctxFor(t)
	key := testKey(t)

	holder := mustAcquire(t, l, ctx, key, padlock.Options{TTL: time.Second}) // the max lease of these tests
	defer holder.Release(ctx)
	if got := holder.Fence(); got != 0 {
		t.Errorf("Fence() = %d on a Redlock Locker, want 0 (no monotonic fence without consensus)", got)
	}
	_, err := other.Acquire(ctx, key, padlock.Options{})
	if !errors.Is(err, padlock.ErrNotAcquired) || errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Acquire of a held key: got %v, want ErrNotAcquired and not ErrUnavailable", err)
	}
	// Slack for a loaded machine: the lease may run down 700ms between
	// the acquisition and these checks.
	if d, ok := padlock.RetryAfter(err); !ok || d <= 300*time.Millisecond || d > time.Second {
		t.Errorf("RetryAfter = %v, %v; want the holder's remaining lease, about 1s", d, ok)
	}
	if d, err := holder.TTL(ctx); err != nil || d <= 300*time.Millisecond || d > time.Second {
		t.Errorf("TTL() = %v, %v; want about 1s", d, err)
	}
}

func TestRedlockMinorityDown(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 5)
	other := redlockOn(t, servers)
	awaitVotes(t, other)
	ctx := ctxFor(t)
	key := testKey(t)

	servers[0].Kill(t)
	servers[3].Kill(t)
	for i := range 3 {
		lk, err := l.Acquire(ctx, key, padlock.Options{})
		if err != nil {
			t.Fatalf("round %d: Acquire with 2 of 5 nodes down: %v", i, err)
		}
		if _, err := other.Acquire(ctx, key, padlock.Options{}); !errors.Is(err, padlock.ErrNotAcquired) {
			t.Fatalf("round %d: second owner's Acquire: got %v, want ErrNotAcquired", i, err)
		}
		if err := lk.Extend(ctx, 900*time.Millisecond); err != nil {
			t.Fatalf("round %d: Extend: %v", i, err)
		}
		if d, err := lk.TTL(ctx); err != nil || d <= 800*time.Millisecond {
			t.Fatalf("round %d: TTL() after Extend = %v, %v; want about 900ms", i, d, err)
		}
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", i, err)
		}
	}
}

func TestRedlockMajorityDownFailsFast(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 5)
	ctx := ctxFor(t)
	key := testKey(t)
	held := mustAcquire(t, l, ctx, key+":held", padlock.Options{NoRenew: true})
	for _, s := range servers[:3] {
		s.Kill(t)
	}
	// Every request on the held lock says which nodes failed, and how.
	wantNodes := []padlock.NodeOutcome{padlock.NodeUnreachable, padlock.NodeUnreachable, padlock.NodeUnreachable, padlock.NodeAgreed, padlock.NodeAgreed}
	if err := held.Extend(ctx, rlMaxLease); !errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("Extend with 3 of 5 nodes down: got %v, want ErrUnavailable", err)
	} else {
		checkNodes(t, "Extend", err, "extend", servers, wantNodes)
	}
	if _, err := held.TTL(ctx); !errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("TTL with 3 of 5 nodes down: got %v, want ErrUnavailable", err)
	} else {
		checkNodes(t, "TTL", err, "ttl", servers, wantNodes)
	}
	if err := held.Release(ctx); !errors.Is(err, padlock.ErrUnavailable) {
		t.Errorf("Release with 3 of 5 nodes down: got %v, want ErrUnavailable", err)
	} else {
		checkNodes(t, "Release", err, "release", servers, wantNodes)
	}

	// One attempt asks all nodes and then undoes itself on all that may
	// hold the lock, each bounded by the node timeout; the Locker may
	// clean up once more.
	// Generous slack for loaded machines; a call the node timeout did not
	// bound would wait for the 10s socket timeout.
	budget := 3*rlNodeTimeout + time.Second
	start := time.Now()
	_, err := l.Acquire(ctx, key, padlock.Options{})
	took := time.Since(start)
	if !errors.Is(err, padlock.ErrNotAcquired) || !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Acquire with 3 of 5 nodes down: got %v, want ErrNotAcquired and ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "2 of 5 nodes agreed, 3 needed") {
		t.Errorf("error %q does not say how many nodes agreed", err)
	}
	checkNodes(t, "Acquire", err, "acquire", servers, wantNodes)
	if took > budget {
		t.Errorf("Acquire took %v, want at most %v", took, budget)
	}
	// Nothing is left behind on the nodes that granted it.
	for _, s := range servers[3:] {
		if keys := s.Keys(t); len(keys) != 0 {
			t.Errorf("node %s holds %q after the failed attempt, want nothing", s, keys)
		}
	}

	// A waiting Acquire gives up when its wait does, never hangs.
	start = time.Now()
	_, err = l.Acquire(ctx, key, padlock.Options{Wait: 300 * time.Millisecond})
	if !errors.Is(err, padlock.ErrNotAcquired) {
		t.Fatalf("waiting Acquire: got %v, want ErrNotAcquired", err)
	}
	if took := time.Since(start); took > 300*time.Millisecond+budget {
		t.Errorf("waiting Acquire took %v, want at most %v", took, 300*time.Millisecond+budget)
	}
}

func TestRedlockHungNodes(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 5)
	ctx := ctxFor(t)
	key := testKey(t)

	servers[2].Pause(t)
	var slowest time.Duration
	for i := range 5 {
		start := time.Now()
		lk, err := l.Acquire(ctx, key, padlock.Options{})
		if err != nil {
			t.Fatalf("round %d: Acquire with one node hung: %v", i, err)
		}
		slowest = max(slowest, time.Since(start))
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", i, err)
		}
	}
	// The hung node is waited for up to the node timeout, no longer.
	if budget := rlNodeTimeout + 750*time.Millisecond; slowest > budget {
		t.Errorf("slowest Acquire with one node hung took %v, want at most %v", slowest, budget)
	}

	// With a majority hung the attempt fails just as fast, naming the hung
	// nodes as timed out; a node's timeout is not the caller's deadline.
	held := mustAcquire(t, l, ctx, key+":held", padlock.Options{NoRenew: true})
	servers[0].Pause(t)
	servers[4].Pause(t)
	hung := []padlock.NodeOutcome{padlock.NodeTimeout, padlock.NodeAgreed, padlock.NodeTimeout, padlock.NodeAgreed, padlock.NodeTimeout}
	err := held.Extend(ctx, rlMaxLease)
	if !errors.Is(err, padlock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Extend with 3 of 5 nodes hung: got %v, want ErrUnavailable and not context.DeadlineExceeded", err)
	}
	checkNodes(t, "Extend", err, "extend", servers, hung)
	// The caller's own deadline, shorter than the node timeout, is its own.
	short, cancel := context.WithTimeout(ctx, rlNodeTimeout/5)
	err = held.Extend(short, rlMaxLease)
	cancel()
	if !errors.Is(err, padlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Extend past the caller's deadline: got %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}
	start := time.Now()
	_, err = l.Acquire(ctx, key, padlock.Options{})
	if !errors.Is(err, padlock.ErrNotAcquired) || !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Acquire with 3 of 5 nodes hung: got %v, want ErrNotAcquired and ErrUnavailable", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire with 3 of 5 nodes hung: got %v, matching context.DeadlineExceeded though the caller's context is live", err)
	}
	checkNodes(t, "Acquire", err, "acquire", servers, hung)
	if took, budget := time.Since(start), 3*rlNodeTimeout+time.Second; took > budget {
		t.Errorf("Acquire with 3 of 5 nodes hung took %v, want at most %v", took, budget)
	}

	// Resumed nodes vote again at once: they did not restart. (They may
	// still grant key to the failed attempt, whose requests waited in their
	// sockets while the releases could not reach them; the lease ends that.)
	for _, s := range servers {
		s.Resume(t)
	}
	lk := mustAcquire(t, l, ctx, key+":after", padlock.Options{})
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release after resume: %v", err)
	}
}

// TestRedlockValidity shows that a majority that answers only after the
// lease's validity is not a lock, and that the attempt is undone on every
// node, the late ones included.
func TestRedlockValidity(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 3)
	ctx := ctxFor(t)
	key := testKey(t)

	// Every attempt waits the node timeout for the hung node, longer than
	// a 50ms lease minus its drift allowance lasts.
	servers[1].Pause(t)
	_, err := l.Acquire(ctx, key, padlock.Options{TTL: 50 * time.Millisecond})
	if !errors.Is(err, padlock.ErrNotAcquired) || !strings.Contains(err.Error(), "but after") {
		t.Fatalf("Acquire whose majority came too late: got %v, want ErrNotAcquired saying it came too late", err)
	}
	for _, s := range []*redistest.Server{servers[0], servers[2]} {
		if keys := s.Keys(t); len(keys) != 0 {
			t.Errorf("node %s holds %q after the late attempt, want nothing", s, keys)
		}
	}
	// The hung node got the request too; once it wakes up, the release
	// that followed (or the 50ms lease) frees it.
	servers[1].Resume(t)
	time.Sleep(100 * time.Millisecond)
	if keys := servers[1].Keys(t); len(keys) != 0 {
		t.Errorf("hung node holds %q after it resumed, want nothing", keys)
	}
}

// TestRedlockRestartedNodeDoesNotVote is the delayed-restart rule at work.
// A holds the lock on nodes 0 and 1; its request never reached node 2 (we
// drop it there by hand, as a lost packet would). Node 0 restarts and
// forgets the lock. Without the rule, B would now get nodes 0 and 2, a
// majority, while A still holds the lock.
func TestRedlockRestartedNodeDoesNotVote(t *testing.T) {
	t.Parallel()
	la, servers := startRedlock(t, 3)
	lb := redlockOn(t, servers)
	awaitVotes(t, lb)
	ctx := ctxFor(t)
	key := testKey(t)

	asked := time.Now() // A's lease runs from no earlier than this
	a := mustAcquire(t, la, ctx, key, padlock.Options{TTL: rlMaxLease, NoRenew: true})
	defer a.Release(ctx)
	if err := servers[2].Client(t).FlushAll(ctx).Err(); err != nil {
		t.Fatalf("drop A's lock on node 2: %v", err)
	}
	servers[0].Restart(t)

	_, err := lb.Acquire(ctx, key, padlock.Options{})
	if err == nil {
		t.Fatal("B acquired the lock A holds, through the node that restarted and forgot it")
	}
	if !errors.Is(err, padlock.ErrNotAcquired) || !strings.Contains(err.Error(), "restarted within the max lease") {
		t.Fatalf("B's Acquire: got %v, want ErrNotAcquired saying a node restarted", err)
	}
	// Node 0 restarted, node 1 holds A's lock, node 2 granted B's.
	qe := checkNodes(t, "B's Acquire", err, "acquire", servers,
		[]padlock.NodeOutcome{padlock.NodeRestarting, padlock.NodeBusy, padlock.NodeAgreed})
	if w := qe.Nodes[0].Wait; w <= 0 || w > rlMaxLease+time.Second {
		t.Errorf("restarted node votes in %v, want within (0, %v]", w, rlMaxLease+time.Second)
	}
	if time.Since(asked) >= rlMaxLease {
		t.Fatal("test too slow: A's lease ended before B tried")
	}

	// Once A's lease is over and the node has been up for the max lease,
	// it votes again.
	lk := mustAcquire(t, lb, ctx, key, padlock.Options{Wait: 5 * time.Second})
	if since := time.Since(asked); since < rlMaxLease {
		t.Errorf("B acquired %v after A asked for a %v lease, before it ended", since, rlMaxLease)
	}
	_ = lk.Release(ctx)
}

// TestRedlockFreshNodes: nodes that just started do not vote for the max
// lease, and the error names each with the time it still has to wait;
// WithPersistentNodes lets nodes that persist every write vote at once,
// and holds those that do not to the rule, saying why.
func TestRedlockFreshNodes(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	servers := redistest.StartN(t, 3)
	ctx := ctxFor(t)
	key := testKey(t)
	// Far above how long starting the nodes can take on a loaded machine.
	const maxLease = 20 * time.Second
	restarting := []padlock.NodeOutcome{padlock.NodeRestarting, padlock.NodeRestarting, padlock.NodeRestarting}

	_, err := redlockOn(t, servers, padlock.WithMaxLease(maxLease)).Acquire(ctx, key, padlock.Options{})
	if !errors.Is(err, padlock.ErrNotAcquired) || !errors.Is(err, padlock.ErrUnavailable) {
		t.Fatalf("Acquire on fresh nodes: got %v, want ErrNotAcquired and ErrUnavailable", err)
	}
	qe := checkNodes(t, "Acquire on fresh nodes", err, "acquire", servers, restarting)
	for i, r := range qe.Nodes {
		if r.Wait <= maxLease-10*time.Second || r.Wait > maxLease+time.Second {
			t.Errorf("fresh node %d votes in %v, want about %v", i, r.Wait, maxLease)
		}
		if r.Err != nil {
			t.Errorf("fresh node %d: Err = %v, want nil without WithPersistentNodes", i, r.Err)
		}
		if !strings.Contains(err.Error(), r.Addr+": restarting, votes in ") {
			t.Errorf("error %q does not say when %s votes", err, r.Addr)
		}
	}

	// The option does not spare nodes whose settings lose writes.
	_, err = redlockOn(t, servers, padlock.WithMaxLease(maxLease), padlock.WithPersistentNodes()).Acquire(ctx, key, padlock.Options{})
	qe = checkNodes(t, "Acquire on fresh nodes without AOF", err, "acquire", servers, restarting)
	for i, r := range qe.Nodes {
		if r.Err == nil || !strings.Contains(r.Err.Error(), "appendonly is no") {
			t.Errorf("fresh node %d without AOF: Err = %v, want it to say appendonly is no", i, r.Err)
		}
	}

	for _, s := range servers {
		c := s.Client(t)
		for _, kv := range [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}} {
			if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
				t.Fatalf("CONFIG SET %s %s on %s: %v", kv[0], kv[1], s, err)
			}
		}
	}
	l := redlockOn(t, servers, padlock.WithMaxLease(maxLease), padlock.WithPersistentNodes())
	lk, err := l.Acquire(ctx, key, padlock.Options{})
	if err != nil {
		t.Fatalf("Acquire on fresh nodes that persist every write, with WithPersistentNodes: %v", err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func TestRedlockRenewal(t *testing.T) {
	t.Parallel()
	l, servers := startRedlock(t, 5)
	ctx := ctxFor(t)
	key := testKey(t)

	// Each renewal waits the node timeout for the hung node, so the lease
	// must be well above it.
	const ttl = rlMaxLease
	lk := mustAcquire(t, l, ctx, key, padlock.Options{TTL: ttl})
	defer lk.Release(ctx)
	servers[1].Kill(t)
	servers[4].Pause(t)
	time.Sleep(2 * ttl)
	if err := lk.Err(); err != nil {
		t.Fatalf("lock with 3 of 5 nodes up was lost: %v", err)
	}
	if d, err := lk.TTL(ctx); err != nil || d <= 0 {
		t.Fatalf("TTL() after %v of renewals = %v, %v; want the lease still held", 2*ttl, d, err)
	}

	// Losing the majority fires the lost signal, before the lease ends.
	servers[0].Kill(t)
	lost := time.Now()
	select {
	case <-lk.Done():
		if !errors.Is(lk.Err(), padlock.ErrLockLost) {
			t.Fatalf("Err() = %v, want ErrLockLost", lk.Err())
		}
		if took := time.Since(lost); took > ttl+50*time.Millisecond {
			t.Errorf("lost signal came %v after the majority was lost, want within the %v lease", took, ttl)
		}
	case <-time.After(3 * ttl):
		t.Fatal("Done did not close after the majority was lost")
	}
}

func TestNewRedlockInvalid(t *testing.T) {
	srv := redistest.Start(t)
	deadlines := func(o *redis.Options) { o.ContextTimeoutEnabled = true }
	good := func() redis.UniversalClient { return srv.Client(t, deadlines) }
	shared := good()
	other := redistest.Start(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { cc.Close() })

	// panics: decided by the program's code; otherwise returned: decided by
	// the deployment's configuration (see "Constructors" in doc.go).
	tests := []struct {
		name    string
		clients []redis.UniversalClient
		opts    []padlock.RedlockOption
		panics  bool
		want    string // in the error message
	}{
		{"no clients", nil, nil, false, "no clients"},
		{"same node twice", []redis.UniversalClient{good(), good()}, nil, false, "clients[1]: reaches " + srv.Addr()},
		{"nil client", []redis.UniversalClient{good(), nil}, nil, true, "clients[1]: is nil"},
		{"same client twice", []redis.UniversalClient{shared, other.Client(t, deadlines), shared}, nil, true, "clients[2]: is clients[0] again"},
		{"cluster client", []redis.UniversalClient{cc}, nil, true, "Cluster client"},
		{"deadline ignored", []redis.UniversalClient{other.Client(t, func(o *redis.Options) { o.ReadTimeout, o.ContextTimeoutEnabled = 3*time.Second, false })}, nil, false, "ContextTimeoutEnabled"},
		{"node timeout", []redis.UniversalClient{good()}, []padlock.RedlockOption{padlock.WithNodeTimeout(-time.Second)}, true, "WithNodeTimeout"},
		{"node timeout above max lease", []redis.UniversalClient{good()},
			[]padlock.RedlockOption{padlock.WithMaxLease(time.Second), padlock.WithNodeTimeout(time.Second)}, true, "WithNodeTimeout"},
		{"max lease", []redis.UniversalClient{good()}, []padlock.RedlockOption{padlock.WithMaxLease(-1)}, true, "WithMaxLease"},
		{"default TTL above max lease", []redis.UniversalClient{good()},
			[]padlock.RedlockOption{padlock.WithMaxLease(time.Second), padlock.WithDefaults(padlock.Options{TTL: time.Minute})}, true, "WithDefaults"},
		{"fair", []redis.UniversalClient{good()}, []padlock.RedlockOption{padlock.WithDefaults(padlock.Options{Fair: true})}, true, "Fair"},
		{"brace in prefix", []redis.UniversalClient{good()}, []padlock.RedlockOption{padlock.WithKeyPrefix("a{b}")}, true, "WithKeyPrefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				l        *padlock.Locker
				err      error
				panicked bool
			)
			func() {
				defer func() {
					if r := recover(); r != nil {
						panicked = true
						err, _ = r.(error)
					}
				}()
				l, err = padlock.NewRedlock(tt.clients, tt.opts...)
			}()
			if l != nil {
				l.Close()
			}
			if panicked != tt.panics {
				t.Fatalf("panicked: got %v, want %v (error %v)", panicked, tt.panics, err)
			}
			if !errors.Is(err, padlock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}

func ExampleNewRedlock() {
	// One client per independent Redis master. ContextTimeoutEnabled lets
	// the node timeout cut a hung node short: NewRedlock panics on a client
	// without it (or without read and write timeouts within the node timeout).
	var clients []redis.UniversalClient
	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{
			Addr:                  addr,
			ContextTimeoutEnabled: true,
		}))
	}
	locker, err := padlock.NewRedlock(clients,
		padlock.WithNodeTimeout(50*time.Millisecond),
		// Only if every node runs appendonly yes with appendfsync always:
		// padlock.WithPersistentNodes(),
	)
	if err != nil {
		fmt.Println(err) // ErrInvalid: no clients, or two reaching one address
		return
	}
	defer locker.Close()

	ctx := context.Background()
	lk, err := locker.Acquire(ctx, "report:daily", padlock.Options{TTL: 10 * time.Second})
	var qe *padlock.QuorumError
	switch {
	case errors.As(err, &qe): // too few nodes agreed: which, and why
		for _, n := range qe.Nodes {
			fmt.Println(n) // e.g. "redis-b:6379: restarting, votes in 12.5s"
		}
		return
	case err != nil:
		fmt.Println("not locked:", err) // busy: ErrNotAcquired
		return
	}
	defer lk.Release(ctx)
	// ... the work, under lk.Context(ctx); lk.Fence() is 0 here.
}
