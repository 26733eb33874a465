package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// startCluster starts a Redis Cluster of masters redis-servers (no
// replicas), each serving an even share of the hash slots, and returns
// them, in slot order, once every one says cluster_state:ok.
func (l *launcher) startCluster(ctx context.Context, masters int) ([]*server, error) {
	servers, err := l.start(ctx, masters,
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf", // in the server's own directory
		"--cluster-node-timeout", "5000",
	)
	if err != nil {
		return nil, err
	}
	if err := formCluster(ctx, servers); err != nil {
		for _, s := range servers {
			l.stop(s)
		}
		return nil, err
	}
	return servers, nil
}

// formCluster gives each server its share of the slots, introduces them
// to each other and waits, up to 30 s, until all of them are ok.
func formCluster(ctx context.Context, servers []*server) error {
	admins := make([]*redis.Client, len(servers))
	for i, s := range servers {
		admins[i] = redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 1})
		defer admins[i].Close()
	}
	for i, c := range admins {
		// Distinct epochs before the nodes meet, as redis-cli --cluster
		// create sets them.
		if err := c.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("bench: cluster %s: set config epoch: %w", servers[i].addr, err)
		}
		lo, hi := i*clusterSlots/len(admins), (i+1)*clusterSlots/len(admins)-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("bench: cluster %s: add slots %d-%d: %w", servers[i].addr, lo, hi, err)
		}
	}
	for _, s := range servers[1:] {
		host, port, _ := strings.Cut(s.addr, ":")
		if err := admins[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("bench: cluster %s: meet %s: %w", servers[0].addr, s.addr, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	want := []string{"cluster_state:ok", fmt.Sprintf("cluster_slots_assigned:%d", clusterSlots), fmt.Sprintf("cluster_known_nodes:%d", len(servers))}
	for {
		ok := true
		for _, c := range admins {
			info, err := c.ClusterInfo(ctx).Result()
			for _, w := range want {
				ok = ok && err == nil && strings.Contains(info, w)
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the cluster of %d masters is not ok after 30s", len(servers))
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// newClusterClient returns a Cluster client counting into h (see newClient).
func newClusterClient(servers []*server, h *roundTrips, poolSize int) *redis.ClusterClient {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: poolSize, ContextTimeoutEnabled: true})
	c.AddHook(h)
	return c
}
