package padlock

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// keysOnTwoMasters returns two user keys whose locks live on different
// masters of c, as the cluster itself routes them, and those masters.
func keysOnTwoMasters(t *testing.T, c *redistest.Cluster, cc *redis.ClusterClient, ks keyspace) (keys [2]string, nodes [2]*redistest.Server) {
	t.Helper()
	ctx := testCtx(t)
	byAddr := map[string]*redistest.Server{}
	for _, n := range c.Nodes() {
		byAddr[n.Addr()] = n
	}
	for i := 0; nodes[1] == nil && i < 1000; i++ {
		k := fmt.Sprintf("order:%d", i)
		m, err := cc.MasterForKey(ctx, ks.lock(k))
		if err != nil {
			t.Fatalf("MasterForKey(%q): %v", k, err)
		}
		n := byAddr[m.Options().Addr]
		if n == nil {
			t.Fatalf("key %q routed to %s, which is not a node of the cluster %v", k, m.Options().Addr, c.Addrs())
		}
		switch {
		case nodes[0] == nil:
			keys[0], nodes[0] = k, n
		case n != nodes[0]:
			keys[1], nodes[1] = k, n
		}
	}
	if nodes[1] == nil {
		t.Fatalf("no two keys on different masters of %v", c.Addrs())
	}
	return keys, nodes
}

// partialCoverage lets the masters of c serve their own slots while another
// master is down. By default a Cluster refuses every command once one
// master fails, and then no lock anywhere can be renewed.
func partialCoverage(t *testing.T, c *redistest.Cluster) {
	t.Helper()
	ctx := testCtx(t)
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
// loaded on its master only, never sent to the paused one.
func TestClusterSlowMasterRenewal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		scriptsFlushed bool
	}{
		{name: "scripts loaded"},
		{name: "scripts flushed", scriptsFlushed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			redistest.Require(t)
			const ttl = 3 * time.Second // renewed every 1s; the client's ReadTimeout is 1s
			c := redistest.StartCluster(t, 3)
			partialCoverage(t, c)
			cc := c.Client(t)
			// SCRIPT commands sent to each node. The hooks go in before the
			// client makes its first node client.
			scriptCmds := map[string]*redistest.Counter{}
			for _, addr := range c.Addrs() {
				scriptCmds[addr] = redistest.CountCommands("script")
			}
			cc.OnNewNode(func(rdb *redis.Client) { rdb.AddHook(scriptCmds[rdb.Options().Addr]) })
			l := New(cc)
			t.Cleanup(func() { l.Close() })
			keys, nodes := keysOnTwoMasters(t, c, cc, l.keys)
			healthyNode, pausedNode := nodes[0], nodes[1]
			loads := scriptCmds[pausedNode.Addr()]

			ctx := testCtx(t)
			start := time.Now()
			healthy := mustAcquireIn(t, l, ctx, keys[0], Options{TTL: ttl})
			defer healthy.Release(ctx)
			paused := mustAcquireIn(t, l, ctx, keys[1], Options{TTL: ttl})
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
			hold := 2*ttl + ttl/2
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

func mustAcquireIn(t *testing.T, l *Locker, ctx context.Context, key string, o Options) *Lock {
	t.Helper()
	lk, err := l.Acquire(ctx, key, o)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	return lk
}

// testCtx returns a context that ends with t, or after 30s.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
