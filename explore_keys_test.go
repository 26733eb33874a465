package padlock_test

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// What the explorer reads in Redis itself, beside what its actors saw:
// fair queues that hold one waiter's place twice, and keys left without
// expiry once every lease ran out.

// watchQueues checks, every few milliseconds until the run ends, that
// no fair queue holds one waiter's place twice: a place queued twice
// stays behind when its waiter is served, and holds the key for a
// waiter that is gone.
func (w *world) watchQueues() {
	// Through a client of its own to each server (on a Cluster, each
	// queue is on the master of its key's slot), without faults
	// (miniredis hands out its lists themselves, not copies).
	var cs []*redis.Client
	for _, s := range w.srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: s.Dial, DisableIdentity: true, Protocol: 2})
		defer c.Close()
		cs = append(cs, c)
	}
	ctx := context.Background()
	seen := map[string]bool{}
	for time.Now().Before(w.end) {
		time.Sleep(5 * time.Millisecond)
		for i, c := range cs {
			w.checkQueues(ctx, w.srvs[i].Name, c, seen)
		}
	}
}

// checkQueues checks the fair queues of the server c reaches.
func (w *world) checkQueues(ctx context.Context, srv string, c *redis.Client, seen map[string]bool) {
	keys, _ := c.Keys(ctx, "*:queue").Result()
	w.queuesGone(srv, keys)
	for _, k := range keys {
		entries, err := c.LRange(ctx, k, 0, -1).Result()
		if err != nil {
			continue
		}
		w.snapshotQueue(srv, k, entries)
		if w.fam == "semfair" && strings.HasSuffix(k, ":sem:queue") {
			w.snapshotSem(ctx, c, srv, k, semPermits)
		}
		n := map[string]int{}
		for _, e := range entries {
			n[queuedPlace(e)]++
		}
		for place, cnt := range n {
			if cnt > 1 && !seen[k+place] {
				seen[k+place] = true
				w.chk.fail(invQueuedTwice, w.chk.now(), "queue %q holds place %q %d times: %v", k, place, cnt, entries)
			}
		}
	}
}

// checkKeys finds keys left without expiry once every lease ran out,
// other than the fence counters (bounded by the hash slots) and the
// election records (one per election name).
func (w *world) checkKeys() {
	for _, s := range w.srvs {
		for _, k := range s.Keys() {
			if s.M.TTL(k) == 0 && !strings.Contains(k, "fence") && !strings.HasSuffix(k, ":leader") {
				w.chk.fail(invKeyLeak, w.chk.now(), "key %q (%s) on %s left without expiry", k, s.M.Type(k), s.Name)
			}
		}
	}
}
