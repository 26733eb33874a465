package padlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// keysByMaster returns perNode user keys for each node of c, in the order
// of c.Nodes(): keys whose locks the cluster itself routes to that master.
func keysByMaster(t *testing.T, c *redistest.Cluster, cc *redis.ClusterClient, ks keyspace, perNode int) [][]string {
	t.Helper()
	ctx := ctxFor(t)
	nodes := c.Nodes()
	byAddr := map[string]int{}
	for i, n := range nodes {
		byAddr[n.Addr()] = i
	}
	keys := make([][]string, len(nodes))
	for i, left := 0, len(nodes)*perNode; left > 0; i++ {
		if i == 10000 {
			t.Fatalf("no %d keys on each master of %v among %d keys", perNode, c.Addrs(), i)
		}
		k := fmt.Sprintf("order:%d", i)
		m, err := cc.MasterForKey(ctx, ks.lock(k))
		if err != nil {
			t.Fatalf("MasterForKey(%q): %v", k, err)
		}
		n, ok := byAddr[m.Options().Addr]
		if !ok {
			t.Fatalf("key %q routed to %s, which is not a node of the cluster %v", k, m.Options().Addr, c.Addrs())
		}
		if len(keys[n]) < perNode {
			keys[n] = append(keys[n], k)
			left--
		}
	}
	return keys
}

// partialCoverage lets the masters of c serve their own slots while another
// master is down. By default a Cluster refuses every command once one
// master fails, and then no lock anywhere can be renewed.
func partialCoverage(t *testing.T, c *redistest.Cluster) {
	t.Helper()
	ctx := ctxFor(t)
	for _, n := range c.Nodes() {
		if err := n.Client(t).ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatalf("%s: CONFIG SET cluster-require-full-coverage no: %v", n, err)
		}
	}
}

// TestClusterSlowMasterRenewal pauses the master of one lock's slot: the
// lock on a healthy master must stay renewed and held, in Redis too, for
// several leases, and the lock on the paused master must be reported lost.
// With scriptsFlushed, the masters lost the renewal script just before the
// pause, so the healthy lock's renewal finds NOSCRIPT: the script must be
// loaded on its master only, never sent to the paused one. With
// replicaAck, every master has a replica that confirms each renewal (and
// does not take over the paused master: the slots stay put); the client
// then waits longer for an answer, as the node clients that confirm
// renewals try once where the Cluster pipeline tries again.
func TestClusterSlowMasterRenewal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		scriptsFlushed bool
		replicaAck     bool
		readTimeout    time.Duration
		ttl            time.Duration // renewed every third of it
	}{
		{name: "scripts loaded", readTimeout: time.Second, ttl: 3 * time.Second},
		{name: "scripts flushed", scriptsFlushed: true, readTimeout: time.Second, ttl: 3 * time.Second},
		// A replica's acknowledgement on a loaded machine once missed
		// 1 s twice in a row, which lost the healthy lock of a 3 s lease:
		// a 2 s wait for it, and a lease that outlasts two such misses.
		{name: "replica ack", replicaAck: true, readTimeout: 4 * time.Second, ttl: 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a Cluster of its own, whose lease it waits out
			redistest.Require(t)
			ttl := tc.ttl
			var (
				c    *redistest.Cluster
				opts []LockerOption
			)
			if tc.replicaAck {
				c = redistest.StartClusterWithReplicas(t, 3, 1)
				for i := range c.Nodes() {
					for _, r := range c.ReplicasOf(i) {
						if err := r.Client(t).ConfigSet(ctxFor(t), "cluster-replica-no-failover", "yes").Err(); err != nil {
							t.Fatalf("%s: CONFIG SET cluster-replica-no-failover yes: %v", r, err)
						}
					}
				}
				opts = append(opts, WithReplicaAck(1, 2*time.Second)) // slack for a loaded machine
			} else {
				c = redistest.StartCluster(t, 3)
			}
			partialCoverage(t, c)
			cc := c.Client(t, func(o *redis.ClusterOptions) { o.ReadTimeout = tc.readTimeout })
			// SCRIPT commands sent to each master. The hooks go in before
			// the client makes its first node client.
			scriptCmds := map[string]*redistest.Counter{}
			for _, addr := range c.Addrs() {
				scriptCmds[addr] = redistest.CountCommands("script")
			}
			cc.OnNewNode(func(rdb *redis.Client) {
				if n, ok := scriptCmds[rdb.Options().Addr]; ok {
					rdb.AddHook(n)
				}
			})
			l := mustNew(t, cc, opts...)
			t.Cleanup(func() { l.Close() })
			byMaster := keysByMaster(t, c, cc, l.keys, 1)
			keys := [2]string{byMaster[0][0], byMaster[1][0]}
			healthyNode, pausedNode := c.Nodes()[0], c.Nodes()[1]
			loads := scriptCmds[pausedNode.Addr()]

			ctx := ctxFor(t)
			start := time.Now()
			healthy := mustAcquire(t, l, ctx, keys[0], Options{TTL: ttl})
			defer healthy.Release(ctx)
			paused := mustAcquire(t, l, ctx, keys[1], Options{TTL: ttl})
			defer paused.Release(ctx)
			if tc.scriptsFlushed {
				for _, n := range c.Nodes() {
					if err := n.Client(t).ScriptFlush(ctx).Err(); err != nil {
						t.Fatalf("%s: SCRIPT FLUSH: %v", n, err)
					}
				}
			}
			loads.Reset()
			pausedNode.Pause(t)
			defer pausedNode.Resume(t)

			var lostAt atomic.Int64 // when the paused lock was reported lost, since start
			go func() {
				select {
				case <-paused.Done():
					lostAt.Store(int64(time.Since(start)))
				case <-ctx.Done():
				}
			}()
			hold := 2 * ttl
			for deadline := time.Now().Add(hold); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if err := healthy.Err(); err != nil {
					t.Fatalf("the lock on the healthy master was reported %v after %v with another master paused; want it held", err, time.Since(start).Round(time.Millisecond))
				}
			}
			select {
			case <-healthy.Done():
				t.Fatal("the lock on the healthy master has Done closed, want it open")
			default:
			}
			d, err := healthyNode.Client(t).PTTL(ctx, l.keys.lock(keys[0])).Result()
			if err != nil || d <= 0 {
				t.Errorf("PTTL of the healthy lock after %v = %v, %v; want the lease still running in Redis", hold, d, err)
			}
			if n := loads.Load(); n != 0 {
				t.Errorf("%d SCRIPT commands sent to the paused master, want 0: scripts are loaded only where they are missing", n)
			}
			if n := scriptCmds[healthyNode.Addr()].Load(); tc.scriptsFlushed && n == 0 {
				t.Errorf("no SCRIPT command sent to the healthy master, want the renewal script loaded there after the flush")
			}

			// The paused lock cannot be renewed: its trusted lease runs out
			// before its lease in Redis could (with slack for a loaded
			// machine, the check is only that it was reported lost).
			if err := paused.Err(); err == nil {
				t.Errorf("the lock on the paused master still reports held after %v, want it lost", hold)
			} else {
				t.Logf("the lock on the paused master was reported lost %v after it was taken (lease %v)", time.Duration(lostAt.Load()).Round(time.Millisecond), ttl)
			}
		})
	}
}

// TestClusterRenewSettlesEachMaster calls a Cluster store's renew with two
// locks on each of two masters, one of them paused: each master's
// renewals are settled together, on their own, the healthy master's with
// its answer while the paused one is still waited for, and the paused
// master is waited for only until the earliest deadline of its renewals,
// not for the client's long ReadTimeout. WithReplicaAck cannot confirm
// anything on a cluster without replicas, so there an answer is the
// replicas' refusal, not a timeout.
func TestClusterRenewSettlesEachMaster(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	c := redistest.StartCluster(t, 3)
	partialCoverage(t, c)
	const readTimeout = 20 * time.Second
	cc := c.Client(t, func(o *redis.ClusterOptions) {
		// Only a deadline can end the wait for the paused master soon.
		o.ReadTimeout, o.ContextTimeoutEnabled = readTimeout, true
	})
	ks := keyspace{prefix: DefaultKeyPrefix, slotted: true}
	keys := keysByMaster(t, c, cc, ks, 2)
	ctx := ctxFor(t)

	// Locks 0 and 1 on the healthy master, 2 and 3 on the one paused.
	var ids []*lockID
	for _, k := range []string{keys[0][0], keys[0][1], keys[1][0], keys[1][1]} {
		id := newLockID(ks, k, newToken(), Options{TTL: time.Minute})
		if err := cc.Set(ctx, id.lockKey(), id.token+"|0", time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", id.lockKey(), err)
		}
		ids = append(ids, id)
	}
	c.Nodes()[1].Pause(t)
	defer c.Nodes()[1].Resume(t)

	for _, tc := range []struct {
		name    string
		store   store
		healthy func(r renewal) error // nil when r is the answer of a healthy master
	}{
		{
			name:  "single",
			store: singleOn(cc),
			healthy: func(r renewal) error {
				if r.err != nil || !r.ok {
					return fmt.Errorf("got ok %v, err %v; want renewed", r.ok, r.err)
				}
				return nil
			},
		},
		{
			name:  "replica ack",
			store: acked{single: singleOn(cc), replicas: 1, timeout: 50 * time.Millisecond},
			healthy: func(r renewal) error {
				var re *replicaError
				if !errors.As(r.err, &re) {
					return fmt.Errorf("got ok %v, err %v; want the replicas' refusal", r.ok, r.err)
				}
				return nil
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			// The paused master's group ends at near, the earlier of its
			// deadlines; the healthy master has until then to answer.
			far, near := start.Add(time.Minute), start.Add(3*time.Second)
			batch := []renewal{
				{id: ids[0], ttl: time.Minute, deadline: far},
				{id: ids[1], ttl: time.Minute, deadline: far},
				{id: ids[2], ttl: time.Minute, deadline: far},
				{id: ids[3], ttl: time.Minute, deadline: near},
			}
			var (
				mu        sync.Mutex
				groups    [][]int
				results   = make([]renewal, len(batch)) // batch as each index was settled
				pausedFor time.Duration                 // from start until the paused master's renewals settled
			)
			tc.store.renew(ctx, batch, func(idx []int) {
				mu.Lock()
				defer mu.Unlock()
				groups = append(groups, slices.Clone(idx))
				for _, i := range idx {
					results[i] = batch[i]
					if i >= 2 {
						pausedFor = time.Since(start)
					}
				}
			})
			for _, g := range groups {
				slices.Sort(g)
			}
			if want := [][]int{{0, 1}, {2, 3}}; !slices.EqualFunc(groups, want, slices.Equal) {
				t.Fatalf("settled groups in order %v, want %v: each master's renewals together, the healthy master's first", groups, want)
			}
			for i := range 2 {
				if err := tc.healthy(results[i]); err != nil {
					t.Errorf("renewal %d on the healthy master: %v", i, err)
				}
			}
			for i := 2; i < 4; i++ {
				if r := results[i]; r.ok || r.err == nil {
					t.Errorf("renewal %d on the paused master: got ok %v, err %v; want an error", i, r.ok, r.err)
				}
			}
			// Half the ReadTimeout: slack for a loaded machine, and still
			// far sooner than the paused master could end the wait itself.
			if pausedFor >= readTimeout/2 {
				t.Errorf("the paused master's renewals settled after %v, want them cut off by their deadline (%v)", pausedFor.Round(time.Millisecond), near.Sub(start))
			}
		})
	}
}

// resetHandover makes the first hand-off command run and then fail as a
// closed connection does, so that padlock sends it again.
type resetHandover struct{ n atomic.Int32 }

func (h *resetHandover) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *resetHandover) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *resetHandover) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if cmd.Name() != "evalsha" || len(args) < 2 || args[1] != handoverScript.Hash() || h.n.Add(1) != 1 {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil {
			return err
		}
		cmd.SetErr(io.EOF) // the connection closed after the server ran it
		return io.EOF
	}
}

// TestHandOffSentAgainIsNoLoss: a Release hands the lock to a waiter of its
// Locker; Redis runs the hand-off, the connection closes before its reply,
// and padlock sends it again. The copy finds the lock under the waiter's
// token: the hand-off happened, and neither the releaser nor the waiter is
// told the lock was lost.
// Regression: the copy said ErrNotHeld; the lock stayed under a lost token.
func TestHandOffSentAgainIsNoLoss(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	if err := handoverScript.Load(ctx, rdb).Err(); err != nil { // one EVALSHA per hand-off
		t.Fatal(err)
	}
	hook := &resetHandover{}
	rdb.AddHook(hook)
	l := mustNew(t, rdb)
	defer l.Close()
	key := testKey(t)
	holder, got := holderWithWaiter(t, l, key, Options{Wait: 10 * time.Second})
	err := holder.Release(ctx)
	if hook.n.Load() < 2 {
		t.Fatalf("scenario not staged: %d hand-off command(s) sent, want the hand-off and its copy", hook.n.Load())
	}
	if errors.Is(err, ErrNotHeld) {
		t.Errorf("Release whose hand-off ran, its copy sent again = %v, want nil", err)
	}
	var next *Lock
	select {
	case h := <-got:
		next = h.lk
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not handed the lock")
	}
	if next == nil {
		t.Fatal("the waiter's Acquire failed")
	}
	defer next.Release(ctx)
	if err := next.Err(); err != nil {
		t.Errorf("the waiter's lock: Err = %v, want nil", err)
	}
	if v, _ := rdb.Get(ctx, l.RedisKey(key)).Result(); tokenOf(v) != next.Token() {
		t.Errorf("Redis holds the lock under %q, the waiter's token is %q", tokenOf(v), next.Token())
	}
}

// TestFairAcquisitionCommands counts the server commands of a contended
// fair acquisition within one Locker, as Redis counts them (INFO
// commandstats: the EVALSHA and every command its script runs): the
// waiter's attempt that finds the key held and joins the queue, and the
// holder's release that hands the lock to it. The join costs at most 7,
// the hand-off 6: the join does not read the head of the queue while the
// key is held, nor move the queue's expiry when an entry's deadline
// already covers its own second (its seventh, a ZSCORE, checks that no
// clean-up buried the attempt, lua/claim.lua); the hand-off serves the
// head in one pop.
func TestFairAcquisitionCommands(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := mustNew(t, rdb)
	defer l.Close()
	l.recheck = time.Minute // wake-ups come from hand-offs alone
	ctx := ctxFor(t)
	key := testKey(t)
	o := Options{Fair: true, Wait: 30 * time.Second}
	if err := plainScripts.handoverFair.Load(ctx, rdb).Err(); err != nil { // one EVALSHA per hand-off
		t.Fatal(err)
	}

	holder := mustAcquire(t, l, ctx, key, o)
	// The first waiter subscribes to the key's notices; the second finds
	// them flowing, as every waiter does while the key stays contended.
	// The first waits longer, so its deadline covers the second's and the
	// queue's expiry stays (on a busy key, most joins find one that does).
	first := queueWaiters(t, l, key, 1, Options{Fair: true, Wait: time.Minute})
	stats := srv.Client(t)
	resetStats(t, stats)
	second := make(chan *Lock, 1)
	go func() {
		lk, err := l.Acquire(context.Background(), key, o)
		if err != nil {
			t.Errorf("second waiter: %v", err)
		}
		second <- lk
	}()
	waitForWaiters(t, l, key, 2)
	waitParked(t, l, key, 2)
	join := commandsRun(t, stats)

	resetStats(t, stats)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-first
	if h.lk == nil || !handedOn(h.lk) {
		t.Fatalf("first waiter: got %v, want the lock handed on", h.lk)
	}
	handOff := commandsRun(t, stats)
	t.Logf("join: %v; hand-off: %v", join, handOff)
	if n := join.total(); n > 7 {
		t.Errorf("the attempt that joins the queue ran %d commands, want at most 7: %v", n, join)
	}
	if n := handOff.total(); n > 6 {
		t.Errorf("the hand-off ran %d commands, want at most 6: %v", n, handOff)
	}

	if err := h.lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if lk := <-second; lk == nil {
		t.Fatal("second waiter: no lock")
	} else if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// commandCounts are calls per command name, from INFO commandstats.
type commandCounts map[string]int

func (c commandCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c commandCounts) String() string {
	names := make([]string, 0, len(c))
	for name := range c {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", name, c[name])
	}
	return b.String()
}

func resetStats(t *testing.T, c *redis.Client) {
	t.Helper()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// commandsRun returns the commands the server ran since its stats were
// reset, leaving out those of connections (HELLO, CLIENT), of pub/sub,
// and of the test itself (CONFIG, INFO).
func commandsRun(t *testing.T, c *redis.Client) commandCounts {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := commandCounts{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		switch strings.SplitN(name, "|", 2)[0] {
		case "hello", "client", "subscribe", "unsubscribe", "ping", "config", "info":
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		got[name] = n
	}
	return got
}
