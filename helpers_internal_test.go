package padlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/hashslot"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The helpers of both test packages: the external one (padlock_test)
// reaches them through export_test.go, under the same names but one:
// startLocker is newLocker there (here newLocker builds every Locker).

// startLocker returns a Locker on a fresh Redis server, closed when t ends.
func startLocker(t testing.TB, opts ...LockerOption) (*Locker, *redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := mustNew(t, rdb, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l, srv, rdb
}

// mustNew is New, ending the test when it refuses client. The caller
// closes the Locker.
func mustNew(t testing.TB, client redis.UniversalClient, opts ...LockerOption) *Locker {
	t.Helper()
	l, err := New(client, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// twoLockers starts a server and two Lockers on it, closed as t ends: as
// two processes sharing one Redis.
func twoLockers(t *testing.T) (srv *redistest.Server, a, b *Locker) {
	t.Helper()
	srv = redistest.Start(t)
	a, b = mustNew(t, srv.Client(t)), mustNew(t, srv.Client(t))
	t.Cleanup(func() { a.Close(); b.Close() })
	return srv, a, b
}

// testKey returns a key unique to t.
func testKey(t testing.TB) string { return strings.ReplaceAll(t.Name(), "/", ":") }

// ctxFor returns a context that ends with t, or after 30s.
func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustAcquire is Acquire, ending the test when it fails. A grant whose
// reply came after its lease had run out (errLateGrant: a short lease on
// a loaded machine, under the race detector) was let go by Acquire and is
// asked for again, a few times: taking the lock is the test's setup, not
// what it checks.
func mustAcquire(t testing.TB, l *Locker, ctx context.Context, key string, o Options) *Lock {
	t.Helper()
	lk, err := l.Acquire(ctx, key, o)
	for try := 1; try < 5 && errors.Is(err, errLateGrant) && ctx.Err() == nil; try++ {
		t.Logf("Acquire(%q): %v; asking again", key, err)
		lk, err = l.Acquire(ctx, key, o)
	}
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return lk
}

// startCluster starts a 3-master cluster and returns it with a Locker on
// it, closed when t ends.
func startCluster(t testing.TB, opts ...LockerOption) (*redistest.Cluster, *Locker) {
	t.Helper()
	c := redistest.StartCluster(t, 3)
	l := mustNew(t, c.Client(t), opts...)
	t.Cleanup(func() { l.Close() })
	return c, l
}

// Redlock tests keep leases short so that the delayed-restart rule, which
// holds a node's vote back until it has been up for the max lease, costs a
// freshly started node about a second rather than the default 30s.
const (
	rlMaxLease = time.Second
	// rlNodesVote is how long after start a node surely votes the first
	// time it is asked: uptime comes in whole seconds, and is trusted to be
	// a second less than it says.
	rlNodesVote = rlMaxLease + 2*time.Second
	// Generous for loopback, so that a busy test machine does not pass
	// for a hung node.
	rlNodeTimeout = 250 * time.Millisecond
)

// leaseRanOut reports whether a lease taken at taken may have run out by
// now, as the Locker trusts it: it trusts a lease from the moment its
// command was sent (after taken) for the lease less the drift margin
// (by default 1% plus 2 ms: under 2% of a lease of 200 ms or more). Before
// that, a lock that reports itself lost is a bug, not a slow machine.
func leaseRanOut(taken time.Time, lease time.Duration) bool {
	return time.Since(taken) >= lease-lease/50
}

// meterStalls starts measuring how late this process runs a goroutine
// that sleeps a millisecond at a time; the returned func stops it and
// says the most that one such sleep overran. That is time a loaded
// machine did not run the test's goroutines, which a bound on how soon
// something happens after an event may allow for: the machine would have
// run the code under test no sooner.
func meterStalls() (stop func() time.Duration) {
	done := make(chan struct{})
	worst := make(chan time.Duration)
	go func() {
		var most time.Duration
		for {
			select {
			case <-done:
				worst <- most
				return
			default:
			}
			start := time.Now()
			time.Sleep(time.Millisecond)
			most = max(most, time.Since(start)-time.Millisecond)
		}
	}()
	return func() time.Duration {
		close(done)
		return <-worst
	}
}

// redlockOn returns a Redlock Locker on servers, with clients of its own
// (another process, as far as Redis can tell), closed when t ends.
func redlockOn(t testing.TB, servers []*redistest.Server, opts ...RedlockOption) *Locker {
	t.Helper()
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		clients[i] = s.Client(t, func(o *redis.Options) {
			o.ContextTimeoutEnabled = true
			// Socket timeouts far above the node timeout, so the timing
			// checks below can only pass if the node timeout bounds calls.
			// The dial's too: a call without a node timeout (Inspect) would
			// otherwise fail on a loaded machine, where a new connection to
			// a live node once took over the 1 s default.
			o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
			o.DialTimeout = 10 * time.Second
			// After a pool's size in failed dials go-redis probes a dead node from
			// a goroutine that sees its pool closed only a second later,
			// past goleak's patience. Tests that kill nodes never get there.
			o.PoolSize, o.PipelinePoolSize = 1000, 1000
		})
	}
	opts = append([]RedlockOption{
		WithMaxLease(rlMaxLease),
		WithNodeTimeout(rlNodeTimeout),
		WithDefaults(Options{TTL: rlMaxLease}),
	}, opts...)
	l, err := NewRedlock(clients, opts...)
	if err != nil {
		t.Fatalf("NewRedlock: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// startRedlock starts n real nodes and returns a Locker on them once every
// node has been up long enough to vote. (Waiting for a majority to vote is
// not enough for tests that then take nodes away.)
func startRedlock(t testing.TB, n int, opts ...RedlockOption) (*Locker, []*redistest.Server) {
	t.Helper()
	redistest.Require(t)
	servers := redistest.StartAged(t, n, rlNodesVote)
	l := redlockOn(t, servers, opts...)
	awaitVotes(t, l)
	return l, servers
}

// awaitVotes waits until l can take a lock, that is, until enough nodes
// have been up for the max lease.
func awaitVotes(t testing.TB, l *Locker) {
	t.Helper()
	ctx := context.Background()
	var err error
	for deadline := time.Now().Add(rlNodesVote + 5*time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var lk *Lock
		if lk, err = l.Acquire(ctx, "probe:"+testKey(t), Options{NoRenew: true}); err == nil {
			_ = lk.Release(ctx)
			return
		}
	}
	t.Fatalf("nodes never voted: %v", err)
}

// clusterKeys returns perNode user keys for each of nodes cluster nodes:
// keys whose locks fall in node i's share of the slots (StartCluster
// splits them evenly, in order).
func clusterKeys(l *Locker, nodes, perNode int) [][]string {
	keys := make([][]string, nodes)
	for n, left := 0, nodes*perNode; left > 0; n++ {
		k := fmt.Sprintf("order:%d", n)
		node := hashslot.Slot(l.RedisKey(k)) * nodes / hashslot.Count
		if len(keys[node]) < perNode {
			keys[node] = append(keys[node], k)
			left--
		}
	}
	return keys
}

// awaitWaiters waits until cond holds for l's local waiters on key (nil
// when none wait), checked under the notifier's lock; what names the
// condition in the failure.
func awaitWaiters(t *testing.T, l *Locker, key, what string, cond func(kw *keyWaiters) bool) {
	t.Helper()
	channel, _, _ := l.keys.lockKeys(key)
	if !waitersOn(l, channel, cond) {
		t.Fatalf("%s: never happened for %q", what, key)
	}
}

// waitersOn reports whether cond came to hold, within 10s, for l's local
// waiters on a notice channel (a lock key, or a hold's), checked under
// the notifier's lock.
func waitersOn(l *Locker, channel string, cond func(kw *keyWaiters) bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		l.notifier.mu.Lock()
		ok := cond(l.notifier.keys[channel])
		l.notifier.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// asleep counts the waiters of kw (nil when none wait) that are asleep
// and stay so until something happens to the key: a waiter that parked
// before its subscription went live wakes when it does, and tries again
// (a release in between would have gone unnoticed), so it is not counted
// once notices are live.
func asleep(kw *keyWaiters) int {
	n := 0
	if kw != nil {
		for _, w := range kw.waiters {
			if w.parked && (w.parkedLive || !kw.live) {
				n++
			}
		}
	}
	return n
}

// waitForWaiters waits until n local waiters queue for key, with a live
// subscription.
func waitForWaiters(t *testing.T, l *Locker, key string, n int) {
	t.Helper()
	awaitWaiters(t, l, key, fmt.Sprintf("%d waiters with a live subscription", n), func(kw *keyWaiters) bool {
		return kw != nil && len(kw.waiters) == n && kw.live
	})
}

// queueWaiters starts n waiting Acquires for key on l, one at a time so
// that they queue in order, and returns the channel their locks arrive on,
// in the order they got them, each tagged with its place in the queue.
func queueWaiters(t *testing.T, l *Locker, key string, n int, o Options) <-chan handed {
	t.Helper()
	got := make(chan handed, n)
	for i := range n {
		go func() {
			lk, err := l.Acquire(context.Background(), key, o)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
			got <- handed{i, lk}
		}()
		waitForWaiters(t, l, key, i+1)
		waitParked(t, l, key, i+1)
	}
	return got
}

// joinLine starts a waiting Acquire of key on l, named who in failures,
// and waits until it is asleep in l's line behind the others, inLine in
// all; its lock arrives on the channel returned.
func joinLine(t *testing.T, l *Locker, key, who string, o Options, inLine int) <-chan *Lock {
	t.Helper()
	got := make(chan *Lock, 1)
	go func() {
		lk, err := l.Acquire(context.Background(), key, o)
		if err != nil {
			t.Errorf("%s: %v", who, err)
		}
		got <- lk
	}()
	awaitWaiters(t, l, key, who+" in line", func(kw *keyWaiters) bool { return kw != nil && len(kw.waiters) == inLine })
	waitParked(t, l, key, inLine)
	return got
}

type handed struct {
	place int
	lk    *Lock
}

// waitParked waits until n waiters for key are asleep, the key's
// subscription has its outcome (live or failed), and none of them will
// wake for that outcome: they stay asleep until something happens to the
// key, or a timer of theirs runs out.
func waitParked(t *testing.T, l *Locker, key string, n int) {
	t.Helper()
	awaitWaiters(t, l, key, fmt.Sprintf("%d waiters asleep", n), func(kw *keyWaiters) bool {
		return kw != nil && subscribed(kw) && asleep(kw) == n
	})
}

// subscribed reports whether kw's SUBSCRIBE has its outcome: confirmed,
// or failed.
func subscribed(kw *keyWaiters) bool {
	select {
	case <-kw.ready:
		return true
	default:
		return false
	}
}

// extendCall reports whether args run the extend script (EVALSHA, or EVAL
// on a server that lacks it) with a lease of ttl (0: any).
func extendCall(args []any, ttl time.Duration) bool {
	if len(args) != 7 || !(args[0] == "evalsha" && args[1] == extendScript.Hash() || args[0] == "eval" && args[1] == extendScript.src) {
		return false
	}
	return ttl == 0 || args[5] == ttl.Milliseconds() || args[5] == strconv.FormatInt(ttl.Milliseconds(), 10)
}

// lagHook delays, by a go-redis hook, the replies of commands that match
// after the server ran them (after), or the sending of pipelines that match
// before the server sees them (before). held is signalled when a pipeline
// is held back.
type lagHook struct {
	after       func(args []any) bool
	afterDelay  time.Duration
	before      func(args []any) bool
	beforeDelay time.Duration
	held        chan struct{}
	armed       atomic.Bool
}

func (h *lagHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lagHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.after != nil && h.armed.Load() && h.after(cmd.Args()) {
			time.Sleep(h.afterDelay)
		}
		return err
	}
}

func (h *lagHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.before != nil && h.armed.Load() {
			for _, c := range cmds {
				if h.before(c.Args()) {
					select {
					case h.held <- struct{}{}:
					default:
					}
					time.Sleep(h.beforeDelay)
					break
				}
			}
		}
		return next(ctx, cmds)
	}
}

// contend has another Locker, on client, wait for key for wait; if it
// takes the lock, the holder must already have heard that its lock is
// lost.
func contend(t *testing.T, client redis.UniversalClient, key string, holder *Lock, wait time.Duration) {
	t.Helper()
	other := mustNew(t, client)
	defer other.Close()
	ctx := context.Background()
	lk, err := other.Acquire(ctx, key, Options{Wait: wait})
	if err != nil {
		if !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("other Locker: %v", err)
		}
		if holder.Err() != nil {
			t.Fatalf("the holder lost its lock (%v) although nobody else could take the key", holder.Err())
		}
		return
	}
	defer lk.Release(ctx)
	if holder.Err() == nil {
		ttl, terr := holder.TTL(ctx)
		t.Fatalf("another Locker took the key while the holder's lock reports held (holder's TTL: %v, %v)", ttl, terr)
	}
}

// holdScript holds back, while armed, the first command of one script
// (by its SHA or source): not sent now, the caller sees a read timeout,
// and the test sends it later (late).
type holdScript struct {
	s     *script
	mu    sync.Mutex
	armed bool
	held  []any
}

func (h *holdScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		h.mu.Lock()
		hold := h.s.is(args) && h.armed
		if hold {
			h.armed, h.held = false, append([]any(nil), args...)
		}
		h.mu.Unlock()
		if hold {
			cmd.SetErr(errFaultTimeout)
			return errFaultTimeout
		}
		return next(ctx, cmd)
	}
}

func (h *holdScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *holdScript) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = true
}

// late returns the command held back, as EVAL (the server may not have
// the script), or nil when none was.
func (h *holdScript) late() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		return nil
	}
	args := slices.Clone(h.held)
	args[0], args[1] = "eval", h.s.src
	return args
}

func (s *script) is(args []any) bool {
	return len(args) > 1 && (args[0] == "evalsha" && args[1] == s.Hash() || args[0] == "eval" && args[1] == s.src)
}

// scriptArgv returns the ARGV of a script call's arguments (EVAL or
// EVALSHA, the script, the number of keys, the keys, then ARGV).
func scriptArgv(args []any) []any {
	n, _ := args[2].(int)
	return args[3+n:]
}

// redlockHooked starts three Redis servers and a Redlock Locker on them
// with the Redlock tests' timings, whose client of node i carries
// hooks[i], once the nodes may vote.
func redlockHooked(t *testing.T, hooks map[int]redis.Hook) (*Locker, []*redistest.Server) {
	t.Helper()
	redistest.Require(t)
	servers := redistest.StartAged(t, 3, rlNodesVote)
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := s.Client(t, func(o *redis.Options) {
			o.ContextTimeoutEnabled = true
			o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second
		})
		if h := hooks[i]; h != nil {
			c.AddHook(h)
		}
		clients[i] = c
	}
	l, err := NewRedlock(clients, WithMaxLease(rlMaxLease), WithNodeTimeout(rlNodeTimeout), WithDefaults(Options{TTL: rlMaxLease}))
	if err != nil {
		t.Fatalf("NewRedlock: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	awaitVotes(t, l)
	return l, servers
}

var errFaultTimeout = &os.PathError{Op: "read", Path: "fault", Err: os.ErrDeadlineExceeded}

// holdBackends are the deployments the semaphore and read-write tests run
// on: one server, and a 3-master Cluster (sharded notices, keys in every
// slot's node).
var holdBackends = []struct {
	name  string
	start func(t *testing.T) func() redis.UniversalClient
}{
	{"single", func(t *testing.T) func() redis.UniversalClient {
		srv := redistest.Start(t)
		return func() redis.UniversalClient { return srv.Client(t) }
	}},
	{"cluster", func(t *testing.T) func() redis.UniversalClient {
		c := redistest.StartCluster(t, 3)
		return func() redis.UniversalClient { return c.Client(t) }
	}},
}

// newSemaphore returns a semaphore of n permits on a new Locker on client,
// both closed when t ends.
func newSemaphore(t *testing.T, client redis.UniversalClient, n int, opts ...LockerOption) (*Locker, *Semaphore) {
	t.Helper()
	l := mustNew(t, client, opts...)
	t.Cleanup(func() { l.Close() })
	s, err := l.Semaphore(n)
	if err != nil {
		t.Fatal(err)
	}
	return l, s
}

// awaitHoldWaiters waits until n of l's waiters are asleep on channel,
// with notices arriving.
func awaitHoldWaiters(t *testing.T, l *Locker, channel string, n int) {
	t.Helper()
	if !waitersOn(l, channel, func(kw *keyWaiters) bool { return kw != nil && asleep(kw) == n && kw.live }) {
		t.Fatalf("%d waiters asleep on %q: never happened", n, channel)
	}
}

// quorumOf returns a Redlock store of n nodes that are never dialled,
// for the tests that count votes and build a QuorumError.
func quorumOf(n int) *quorum {
	q := &quorum{nodes: make([]*node, n), need: n/2 + 1}
	for i := range q.nodes {
		q.nodes[i] = &node{addr: fmt.Sprintf("10.0.0.%d:6379", i+1)}
	}
	return q
}

// replyError stands for a Redis error reply.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// timeoutError stands for a socket deadline that passed.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// grantNotices makes l's notifier drop (or deliver copies of) the grant
// notices it receives, as keep says, and counts them.
func grantNotices(l *Locker, keep func(n int64) int) *atomic.Int64 {
	var seen atomic.Int64
	l.notifier.fault = func(_, payload string) (int, time.Duration) {
		if _, _, ok := parseGrant(payload); ok {
			return keep(seen.Add(1)), 0
		}
		return 1, 0
	}
	return &seen
}

// handedOnRelease releases holder and returns what the waiter queued on
// got (queueWaiters) then receives, failing t if that is no lock.
func handedOnRelease(t *testing.T, ctx context.Context, holder *Lock, got <-chan handed) handed {
	t.Helper()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.lk == nil {
		t.Fatal("the waiter got no lock")
	}
	return h
}

// holderWithWaiter takes key on l as a waiting holder with fences reserved
// for waiters behind it, and queues one waiter with options o behind it.
func holderWithWaiter(t *testing.T, l *Locker, key string, o Options) (*Lock, <-chan handed) {
	t.Helper()
	holder, err := l.Acquire(context.Background(), key, Options{Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	holder.fenceEnd = holder.fence + 5 // as if waiters had queued behind it
	return holder, queueWaiters(t, l, key, 1, o)
}

// reserving returns the attempt of a waiting Acquire of l at id that
// reserves n fences.
func reserving(id *lockID, l *Locker, n int64) *attempt {
	return &attempt{argv: [5]any{id.argv[0], id.argv[1], n, l.idArg, "1"}}
}

// countAttempts counts the attempts that did not take a lock.
type countAttempts struct {
	NopObserver
	n atomic.Int64
}

func (c *countAttempts) AcquireAttempt(context.Context, AcquireAttemptEvent) { c.n.Add(1) }

// handedOn reports whether lk was handed over by a holder of its Locker:
// it goes on with the lease of the lock it was handed by.
func handedOn(lk *Lock) bool { return lk.lease != &lk.own }
