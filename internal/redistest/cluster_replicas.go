package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// StartClusterWithReplicas starts a Redis Cluster as StartCluster does,
// and then perMaster replicas (1 or more) for each master, and returns
// once every node reports cluster_state:ok and every replica has synced
// with its master (or fails t after 20 s). Nodes still returns the
// masters; ReplicasOf returns a master's replicas. The replicas keep Redis
// Cluster's default of taking over a master that fails; a test that wants
// the slots to stay put can turn that off on them (CONFIG SET
// cluster-replica-no-failover yes).
func StartClusterWithReplicas(t testing.TB, masters, perMaster int) *Cluster {
	t.Helper()
	if perMaster < 1 {
		t.Fatalf("redistest: StartClusterWithReplicas needs perMaster >= 1, got %d", perMaster)
	}
	c := StartCluster(t, masters)
	bin := requireBinary(t)
	specs := make([]spec, masters*perMaster)
	for i := range specs {
		specs[i] = spec{bin: bin, dir: t.TempDir(), data: true, args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", nodeTimeout,
		}}
	}
	c.replicas = startReal(t, specs, true)
	c.perMaster = perMaster
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.attachReplicas(ctx); err != nil {
		t.Fatalf("redistest: add replicas %v to cluster %v: %v", replicaAddrs(c.replicas), c.Addrs(), err)
	}
	return c
}

// attachReplicas makes replica j a replica of master j/perMaster and waits
// until all nodes are ok and every replica is in sync.
func (c *Cluster) attachReplicas(ctx context.Context) error {
	all := append(c.Nodes(), c.replicas...)
	clients := make([]*redis.Client, len(all))
	for i, n := range all {
		clients[i] = redis.NewClient(n.Options())
		defer clients[i].Close()
	}
	if err := setNodeTimeout(ctx, clients, formingNodeTimeout); err != nil {
		return err
	}
	seed := clients[0]
	ids := make([]string, len(c.nodes))
	for i := range c.nodes {
		id, err := clients[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER MYID: %w", c.nodes[i].Addr(), err)
		}
		ids[i] = id
	}
	for _, r := range c.replicas {
		host, port, _ := strings.Cut(r.Addr(), ":")
		if err := seed.ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("%s: meet %s: %w", c.nodes[0].Addr(), r.Addr(), err)
		}
	}
	for j, r := range c.replicas {
		rdb := clients[len(c.nodes)+j]
		master := ids[j/c.perMaster]
		// The replica must have heard of its master through the cluster
		// bus before it can follow it.
		var last error
		err := poll(ctx, func() bool {
			last = rdb.Do(ctx, "CLUSTER", "REPLICATE", master).Err()
			return last == nil
		}, func() string { return fmt.Sprintf("%s: CLUSTER REPLICATE %s: %v", r.Addr(), master, last) })
		if err != nil {
			return err
		}
	}
	if err := awaitClusterOK(ctx, clients); err != nil {
		return err
	}
	for _, r := range c.replicas {
		if err := awaitReplication(ctx, r); err != nil {
			return fmt.Errorf("%s: %w", r.Addr(), err)
		}
	}
	for _, m := range c.nodes {
		if err := awaitOnline(ctx, m, c.perMaster); err != nil {
			return fmt.Errorf("%s: %w", m.Addr(), err)
		}
	}
	return setNodeTimeout(ctx, clients, nodeTimeout)
}

// ReplicasOf returns the replicas of Nodes()[i], as started: a failover
// may since have made one of them the master.
func (c *Cluster) ReplicasOf(i int) []*Server {
	return append([]*Server(nil), c.replicas[i*c.perMaster:(i+1)*c.perMaster]...)
}

func replicaAddrs(servers []*Server) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}
