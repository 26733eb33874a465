package padlock_test

import (
	"fmt"
	"slices"
	"sync"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/explore"

	"github.com/redis/go-redis/v9"
)

// The explorer's deployments: what a seed's Lockers run on. The redlock
// family runs on Redlock (2 to 5 nodes), with the operations of
// redlockOps; one seed in three of clusterFamilies runs on a Redis Cluster
// in memory (explore.Cluster: 2 or 3 masters, each its own server, every
// Locker over its own redis.ClusterClient); every other seed on one node.
// See "The matrix" in RELIABILITY.md.

// clusterFamilies are the families whose seeds run on a Cluster in memory
// one time in three: every family of a Locker made with New.
var clusterFamilies = []string{"mutex", "fair", "rw", "election", "sem", "semfair", "keep", "extend", "resume", "multi", "schedule"}

// exploreDeployment returns what seed's run of family fam runs on:
// "redlock", "cluster" or "single", and for a Cluster how many masters.
// Drawn apart from the rest of the run's randomness (as hot keys are),
// so that a seed left on one node runs as it did before the Cluster.
func exploreDeployment(seed uint64, fam string) (string, int) {
	if fam == "redlock" {
		return "redlock", 0
	}
	r := (&world{seed: seed}).rng(-400)
	if slices.Contains(clusterFamilies, fam) && r.IntN(3) == 0 {
		return "cluster", 2 + r.IntN(2)
	}
	return "single", 0
}

// redlockOps returns the family whose operations a redlock seed runs on
// its Redlock Lockers: "redlock" (Acquire, Extend, Release, ReleaseAfter)
// one time in two, else "multi" (AcquireAll beside them), "resume"
// (Detach and Resume) or "schedule" (schedule.Every and Run). Drawn apart,
// so that a seed left to "redlock" runs as it did before.
func redlockOps(seed uint64) string {
	r := (&world{seed: seed}).rng(-500)
	return pick(r, "redlock", "redlock", "redlock", "multi", "resume", "schedule")
}

// newClusterLocker returns Locker i of a run on the Cluster, over a
// client with one fault hook per master, and records both. The client has
// ContextTimeoutEnabled only when the plan says so.
func (w *world) newClusterLocker(i int, opts ...padlock.LockerOption) *padlock.Locker {
	var below []redis.Hook
	if i == w.doomed {
		// Below every node's fault hook, as on one node: nothing of a
		// dead process goes out, and the fault hook sees it fail (and,
		// told Gone, decides no fault for it that would run it late).
		below = append(below, killer{&w.dead})
	}
	c, hs := w.cluster.NewClient(8*i, fmt.Sprintf("L%d", i), w.planOf(i), w.tr, &w.late, below...)
	for _, h := range hs {
		if i == w.doomed {
			h.Gone = w.dead.Load
		}
		w.watchTokens(h)
		w.watchFaults(h, i)
		w.lateCopies(h, i)
	}
	w.clients = append(w.clients, c)
	w.hooks = append(w.hooks, hs...)
	w.lhooks = append(w.lhooks, hs)
	return padlock.NewUnchecked(c, opts...)
}

// quietClient returns a client of the run's deployment (one node or the
// Cluster) without faults, and what closes it.
func (w *world) quietClient(id int, name string, late *sync.WaitGroup) (redis.UniversalClient, func()) {
	plan := &explore.Plan{Seed: w.seed, Latency: w.plan.Latency}
	if w.cluster != nil {
		c, hs := w.cluster.NewClient(id, name, plan, w.tr, late)
		return c, func() {
			for _, h := range hs {
				h.CloseSide()
			}
			_ = c.Close()
		}
	}
	c, h := explore.NewClient(id, name, w.srv, plan, w.tr, late)
	return c, func() { h.CloseSide(); _ = c.Close() }
}

// serversOf returns the servers that may hold a Redis key: on a Cluster
// the master of its slot; on Redlock every node; else the one server.
func (w *world) serversOf(redisKey string) []*explore.Server {
	if w.cluster != nil {
		return w.srvs[w.cluster.ServerOf(redisKey) : w.cluster.ServerOf(redisKey)+1]
	}
	return w.srvs
}

// spreadKeys renames the run's keys, on a Cluster, so that the i-th falls
// in a slot of master i mod the masters: an AcquireAll of two keys or
// more spans masters, and the keys of a hot run are on each of them.
func (w *world) spreadKeys() {
	if w.cluster == nil {
		return
	}
	n := len(w.srvs)
	used := map[string]bool{}
	for i := range w.keys {
		for c := 0; ; c++ {
			k := fmt.Sprintf("k%d", c)
			if !used[k] && w.cluster.ServerOf(w.lockers[0].RedisKey(k)) == i%n {
				used[k] = true
				w.keys[i] = k
				break
			}
		}
	}
}

// keyMasters returns, on a Cluster, the master of each of the run's keys.
func (w *world) keyMasters() []string {
	var ms []string
	for _, k := range w.keys {
		ms = append(ms, k+"@"+w.serversOf(w.lockers[0].RedisKey(k))[0].Name)
	}
	return ms
}
