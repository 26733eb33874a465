package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterTimeout bounds the wait for a new cluster to agree it is ok.
	// That takes about 2 s: a master node holds back cluster_state:ok for
	// 2 s after it starts (CLUSTER_WRITABLE_DELAY in Redis). The rest is
	// for a loaded CI machine (redis-cli's wait to join once took over
	// 20 s beside CI).
	clusterTimeout = 60 * time.Second
	// nodeTimeout is the nodes' cluster-node-timeout, 1 s, so that a
	// killed node is noticed quickly.
	nodeTimeout = "1000"
	// formingNodeTimeout is their cluster-node-timeout while the cluster
	// forms (clusterTimeout): Redis drops a handshake after the node
	// timeout, and a node whose handshake with the one it was introduced
	// to is dropped is never introduced again. On a loaded machine a node
	// stalled for over a second as it met the others, and the cluster
	// never formed (redis-cli --cluster create waited to join until it
	// was killed).
	formingNodeTimeout = "60000"
)

// Cluster is a Redis Cluster of real redis-server masters on loopback
// (with replicas when started by StartClusterWithReplicas), started for a
// test and stopped when it ends.
type Cluster struct {
	nodes     []*Server // the masters, in slot order
	replicas  []*Server // perMaster for each master, in the masters' order
	perMaster int
}

// StartCluster starts a Redis Cluster of masters nodes (1 or more) whose
// hash slots are split evenly among them, in order, and returns once every
// node reports cluster_state:ok (or fails t after 20 s). Nodes run with a
// cluster-node-timeout of 1 s, so a killed node is noticed quickly.
//
// With 3 or more masters the cluster is formed the way operators form one,
// with redis-cli --cluster create; with fewer (which redis-cli refuses), or
// without redis-cli, with CLUSTER ADDSLOTS and CLUSTER MEET, which gives
// the same slot layout. StartCluster needs a real redis-server: without one
// it skips t, or fails it under PADLOCK_REQUIRE_REDIS=1. Under go test
// -short it skips t (SkipSlowDeployments).
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("redistest: StartCluster needs masters >= 1, got %d", masters)
	}
	SkipSlowDeployments(t, "a Redis Cluster")
	holdHeavySlot(t)
	bin := requireBinary(t)
	specs := make([]spec, masters)
	for i := range specs {
		specs[i] = spec{bin: bin, dir: t.TempDir(), data: true, args: []string{
			"--cluster-enabled", "yes",
			// Relative to the node's own directory, so nodes never share it.
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", nodeTimeout,
		}}
	}
	c := &Cluster{nodes: startReal(t, specs, true)}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.form(ctx); err != nil {
		t.Fatalf("redistest: form cluster of %v: %v", c.Addrs(), err)
	}
	return c
}

// form gives each node its share of the slots, introduces them to each
// other and waits until all of them are ok.
func (c *Cluster) form(ctx context.Context) error {
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = redis.NewClient(n.Options())
		defer clients[i].Close()
	}
	if err := setNodeTimeout(ctx, clients, formingNodeTimeout); err != nil {
		return err
	}
	if cli, err := findRedisCLI(); err == nil && len(c.nodes) >= 3 {
		args := append([]string{"--cluster", "create"}, c.Addrs()...)
		args = append(args, "--cluster-replicas", "0", "--cluster-yes")
		out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
		}
		if err := awaitClusterOK(ctx, clients); err != nil {
			return err
		}
		return setNodeTimeout(ctx, clients, nodeTimeout)
	}
	for i, rdb := range clients {
		// Distinct config epochs, set before the nodes meet, spare them
		// the collision handling that would otherwise bump epochs one by
		// one (redis-cli --cluster create does the same).
		if err := rdb.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("%s: set config epoch: %w", c.nodes[i].Addr(), err)
		}
		lo, hi := i*clusterSlots/len(c.nodes), (i+1)*clusterSlots/len(c.nodes)
		slots := make([]int, 0, hi-lo)
		for s := lo; s < hi; s++ {
			slots = append(slots, s)
		}
		if err := rdb.ClusterAddSlots(ctx, slots...).Err(); err != nil {
			return fmt.Errorf("%s: add slots %d-%d: %w", c.nodes[i].Addr(), lo, hi-1, err)
		}
	}
	for _, n := range c.nodes[1:] {
		host, port, _ := strings.Cut(n.Addr(), ":")
		if err := clients[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("%s: meet %s: %w", c.nodes[0].Addr(), n.Addr(), err)
		}
	}
	if err := awaitClusterOK(ctx, clients); err != nil {
		return err
	}
	return setNodeTimeout(ctx, clients, nodeTimeout)
}

// setNodeTimeout sets cluster-node-timeout (in milliseconds) on every
// node: formingNodeTimeout while a cluster forms, nodeTimeout once it has.
// A restarted node starts with nodeTimeout, and meets no one anew: it
// knows the others from its nodes.conf.
func setNodeTimeout(ctx context.Context, clients []*redis.Client, ms string) error {
	for _, rdb := range clients {
		if err := rdb.ConfigSet(ctx, "cluster-node-timeout", ms).Err(); err != nil {
			return fmt.Errorf("%s: CONFIG SET cluster-node-timeout %s: %w", rdb.Options().Addr, ms, err)
		}
	}
	return nil
}

// WaitOK waits until every node reports cluster_state:ok with all slots
// assigned and all nodes known, as after StartCluster, and fails t if that
// takes longer than 20 s. Use it after restarting a node: the node answers
// at once but, like any restarted master, holds back ok for 2 s.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	all := append(c.Nodes(), c.replicas...)
	clients := make([]*redis.Client, len(all))
	for i, n := range all {
		clients[i] = redis.NewClient(n.Options())
		defer clients[i].Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := awaitClusterOK(ctx, clients); err != nil {
		t.Fatalf("redistest: cluster %v: %v", c.Addrs(), err)
	}
}

// awaitClusterOK polls CLUSTER INFO on every node until each knows all the
// others, sees every slot assigned and says cluster_state:ok.
func awaitClusterOK(ctx context.Context, clients []*redis.Client) error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": strconv.Itoa(clusterSlots),
		"cluster_known_nodes":    strconv.Itoa(len(clients)),
	}
	var last string
	return poll(ctx, func() bool {
		for _, rdb := range clients {
			info, err := rdb.ClusterInfo(ctx).Result()
			if err != nil {
				last = fmt.Sprintf("%s: %v", rdb.Options().Addr, err)
				return false
			}
			if !infoHas(info, want) {
				last = fmt.Sprintf("%s reports:\n%s", rdb.Options().Addr, info)
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("not ok within %v; %s", clusterTimeout, last) })
}

// infoHas reports whether an INFO-style reply (field:value lines) has all
// the wanted values.
func infoHas(info string, want map[string]string) bool {
	got := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Nodes returns the cluster's nodes, in slot order: node i holds the i-th
// share of the slots. Each can be killed, paused or restarted; a restarted
// node rejoins with its old slots (its nodes.conf survives) but no data.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// Addrs returns the nodes' addresses, in the order of Nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Options returns a new copy of the go-redis options ClusterClient uses:
// every node as a seed, and the timeouts and ContextTimeoutEnabled of
// Server.Options (1 s dial, read and write, 2 s pool, one dial attempt).
// MOVED and ASK redirects keep the go-redis default of 3.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		DialTimeout:           clientDialTimeout,
		DialerRetries:         1,
		ReadTimeout:           clientIOTimeout,
		WriteTimeout:          clientIOTimeout,
		PoolTimeout:           clientPoolTimeout,
		ContextTimeoutEnabled: true,
	}
}

// Client returns a new go-redis cluster client, made from Options and then
// changed by each of opts in turn. It is closed when t ends, before the
// nodes stop.
func (c *Cluster) Client(t testing.TB, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	o := c.Options()
	for _, f := range opts {
		f(o)
	}
	cc := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
