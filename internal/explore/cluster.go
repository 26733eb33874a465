package explore

import (
	"context"
	"fmt"
	"sync"

	"github.com/padlockgo/padlock/internal/hashslot"
	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster in memory: its masters, each its own Server
// with its own address, share the 16384 hash slots in equal ranges, in
// order. There are no replicas and no slot ever moves (no MOVED, no ASK).
// miniredis has no sharded pub/sub (SSUBSCRIBE, SPUBLISH): a Locker's
// waiters hear no release notices there and wait on their timers.
type Cluster struct {
	Servers []*Server
}

// NewCluster starts n servers, named m0, m1, ..., as one Cluster.
func NewCluster(n int, tr *Trace) *Cluster {
	c := &Cluster{}
	for j := range n {
		s := NewServer(fmt.Sprintf("m%d", j), tr)
		// Not a loopback address: go-redis replaces the host of a
		// loopback address in a slot map with the one it asked.
		s.Addr = fmt.Sprintf("10.0.0.%d:6379", j+1)
		c.Servers = append(c.Servers, s)
	}
	return c
}

// Owner returns the index of the server that serves slot.
func (c *Cluster) Owner(slot int) int { return slot * len(c.Servers) / hashslot.Count }

// ServerOf returns the index of the server that serves a Redis key.
func (c *Cluster) ServerOf(key string) int { return c.Owner(hashslot.Slot(key)) }

// Slots returns the slot map, as CLUSTER SLOTS would.
func (c *Cluster) Slots(context.Context) ([]redis.ClusterSlot, error) {
	var slots []redis.ClusterSlot
	for j, s := range c.Servers {
		start := (j*hashslot.Count + len(c.Servers) - 1) / len(c.Servers)
		end := ((j+1)*hashslot.Count+len(c.Servers)-1)/len(c.Servers) - 1
		slots = append(slots, redis.ClusterSlot{Start: start, End: end, Nodes: []redis.ClusterNode{{ID: s.Name, Addr: s.Addr}}})
	}
	return slots, nil
}

func (c *Cluster) server(addr string) (int, *Server) {
	for j, s := range c.Servers {
		if s.Addr == addr {
			return j, s
		}
	}
	panic(fmt.Sprintf("explore: no server of the Cluster at %s", addr))
}

// NewClient returns a Cluster client whose client of each server has a
// fault hook of its own deciding by plan (the hook of server j has the ID
// id+j and the name name.<server>), and those hooks: a fault, a pause, a
// restart is a server's, as a broken link or a stopped process is. The
// hooks sit below the Cluster client, which sends again what met a
// network error (but a command go-redis sends once), as it does on a real
// Cluster. late is as for NewClient.
//
// Each node's client also carries below, after its fault hook, the hooks
// of below (a process killed: explore_idle_test.go's killer).
func (c *Cluster) NewClient(id int, name string, plan *Plan, tr *Trace, late *sync.WaitGroup, below ...redis.Hook) (*redis.ClusterClient, []*Hook) {
	hooks := make([]*Hook, len(c.Servers))
	for j, s := range c.Servers {
		side := redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: s.Dial, DisableIdentity: true, Protocol: 2, PoolSize: 256})
		hooks[j] = &Hook{ID: id + j, Name: name + "." + s.Name, plan: plan, srv: s, side: side, tr: tr, late: late}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{c.Servers[0].Addr},
		ClusterSlots:          c.Slots,
		DisableIdentity:       true,
		Protocol:              2,
		PoolSize:              256, // see NewClient
		ContextTimeoutEnabled: plan.ContextTimeout,
		NewClient: func(o *redis.Options) *redis.Client {
			// A node's client, made whenever the Cluster client first
			// needs the node (again): the same hook each time.
			j, _ := c.server(o.Addr)
			h := hooks[j]
			o.Dialer = h.dial
			cl := redis.NewClient(o)
			cl.AddHook(h)
			for _, b := range below {
				cl.AddHook(b)
			}
			return cl
		},
	})
	return cc, hooks
}

// Close stops every server.
func (c *Cluster) Close() {
	for _, s := range c.Servers {
		s.Close()
	}
}
