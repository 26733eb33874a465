package padlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// store is where a Locker's locks live: one Redis deployment (a node, a
// Sentinel-managed master or a Cluster), or a quorum of independent nodes.
// Each method is one attempt; waiting, renewal and signalling are the
// Locker's.
type store interface {
	// acquire takes the lock for id.token with a lease of id's TTL. at
	// is what an attempt of a waiting Acquire sends besides; nil for a
	// single attempt.
	acquire(ctx context.Context, id *lockID, at *attempt) (grant, error)
	// release deletes the lock if id.token holds it, as g says (see
	// handoff.go); ok reports whether it did.
	release(ctx context.Context, id *lockID, g giveBack) (ok bool, err error)
	// extend resets the lease to ttl if id.token holds the lock.
	extend(ctx context.Context, id *lockID, ttl time.Duration) (ok bool, err error)
	// pttl returns the remaining lease if id.token holds the lock.
	pttl(ctx context.Context, id *lockID) (d time.Duration, ok bool, err error)
	// leaveQueue takes a fair-mode waiter that stops waiting out of the
	// key's queue.
	leaveQueue(ctx context.Context, id *lockID) error
	// renew extends every lock in batch to its ttl if its token still holds
	// it, in one pipelined round trip per Redis node, and fills in each
	// renewal's ok and err.
	renew(ctx context.Context, batch []renewal)
}

// grant is what an acquire attempt got: the lock with the fences reserved
// for it (first is Lock.Fence; the Locker may hand the lock on with the
// fences up to last, see handoff.go), or, when first is 0, the holder's
// remaining lease (0 when unknown).
type grant struct {
	first, last int64
	holderTTL   time.Duration
}

// grantOf reads an acquire script's reply: {first, last} reserved fence,
// a single fence (> 0), or -1 - the holder's remaining lease in ms.
func grantOf(reply any, err error) (grant, error) {
	if err != nil {
		return grant{}, err
	}
	switch r := reply.(type) {
	case []any:
		if len(r) == 2 {
			first, ok1 := r[0].(int64)
			last, ok2 := r[1].(int64)
			if ok1 && ok2 && first > 0 && last >= first {
				return grant{first: first, last: last}, nil
			}
		}
	case int64:
		if r > 0 {
			return grant{first: r, last: r}, nil
		}
		return grant{holderTTL: time.Duration(-1-r) * time.Millisecond}, nil
	}
	return grant{}, fmt.Errorf("padlock: unexpected acquire reply %v", reply)
}

// renewal is one lock's part of a watchdog batch.
type renewal struct {
	id      *lockID
	ttl     time.Duration
	extends uint64 // the lock's Extend count when the batch was made
	ok      bool   // the token still held the lock and its lease was reset
	err     error  // the lock's fate is unknown: Redis was not reached
}

// lockID names one lock in Redis: its keys and owner token, with the
// arguments every script call for it sends (token and lease), boxed once
// per Acquire (boxing them for every call would cost allocations on the
// hot path). It is shared by every holder the lock is handed to, so it
// holds nothing that changes from one attempt to the next (see attempt).
type lockID struct {
	keys  [3]string // the lock key, its slot's fence counter, its fair queue
	token string
	argv  [2]any // token, lease in ms
	fair  bool   // Options.Fair: acquire through the queue, release to it
}

func newLockID(ks keyspace, key, token string, o Options) *lockID {
	id := &lockID{token: token, fair: o.Fair}
	id.keys[0], id.keys[1], id.keys[2] = ks.lockKeys(key)
	id.argv[0], id.argv[1] = token, defaultLeaseArg
	if o.TTL != DefaultTTL {
		id.argv[1] = o.TTL.Milliseconds()
	}
	return id
}

// defaultLeaseArg is DefaultTTL in ms, boxed once: most locks have it.
var defaultLeaseArg any = DefaultTTL.Milliseconds()

// attempt is what one attempt of a waiting Acquire sends besides the
// lock's identity. It belongs to that Acquire (acquisition.at), so that
// filling it in for each attempt costs no allocation and touches nothing
// a holder of the lock shares.
type attempt struct {
	// argv is acquire.lua's ARGV: the token, the lease, how many fences to
	// reserve, the Locker's id (boxed once per Locker) and "1".
	argv [5]any
	// queueFor is how long a fair waiter asks to stay queued; set until
	// Redis has confirmed it queued the waiter, 0 otherwise.
	queueFor time.Duration
}

// acquireArgs returns acquire.lua's ARGV for an attempt at id: the token
// and lease alone for a single attempt (at is nil).
func acquireArgs(id *lockID, at *attempt) []any {
	if at == nil {
		return id.argv[:]
	}
	return at.argv[:]
}

// queueTime returns how long a fair attempt asks to stay queued, in ms.
func (at *attempt) queueTime() int64 {
	if at == nil {
		return 0
	}
	return at.queueFor.Milliseconds()
}

// lockKey returns the key of the lock itself.
func (id *lockID) lockKey() string { return id.keys[0] }

// single is the store on one Redis deployment reached through go-redis:
// a single node, a Sentinel failover client or a Cluster client. Every
// script touches keys of one hash slot, so Cluster routes it to one node.
type single struct {
	client  redis.UniversalClient
	scripts *publishingScripts
}

func singleOn(client redis.UniversalClient) single {
	if _, ok := client.(*redis.ClusterClient); ok {
		return single{client: client, scripts: shardedScripts}
	}
	return single{client: client, scripts: plainScripts}
}

func (s single) acquire(ctx context.Context, id *lockID, at *attempt) (grant, error) {
	if id.fair {
		return grantOf(acquireFairScript.Run(ctx, s.client, id.keys[:], id.token, id.argv[1], at.queueTime()).Result())
	}
	return grantOf(s.scripts.acquire.Run(ctx, s.client, id.keys[:2], acquireArgs(id, at)...).Result())
}

func (s single) release(ctx context.Context, id *lockID, g giveBack) (bool, error) {
	var (
		n   int64
		err error
	)
	notify := ""
	if g.notify {
		notify = "1"
	}
	switch {
	case id.fair:
		n, err = s.scripts.releaseFair.Run(ctx, s.client, id.keys[:], id.argv[:1]...).Int64()
	case g.window >= time.Millisecond:
		n, err = s.scripts.release.Run(ctx, s.client, id.keys[:1], id.argv[0], notify, g.window.Milliseconds(), g.yieldTo).Int64()
	case g.notify:
		n, err = s.scripts.release.Run(ctx, s.client, id.keys[:1], id.argv[0], notify).Int64()
	default: // the token alone: publish only if a waiter marked the lock
		n, err = s.scripts.release.Run(ctx, s.client, id.keys[:1], id.argv[:1]...).Int64()
	}
	return n == 1, err
}

func (s single) leaveQueue(ctx context.Context, id *lockID) error {
	return s.scripts.leaveFair.Run(ctx, s.client, id.keys[:], id.argv[:1]...).Err()
}

func (s single) extend(ctx context.Context, id *lockID, ttl time.Duration) (bool, error) {
	n, err := extendScript.Run(ctx, s.client, id.keys[:1], id.token, ttl.Milliseconds()).Int64()
	return n == 1, err
}

func (s single) pttl(ctx context.Context, id *lockID) (time.Duration, bool, error) {
	n, err := pttlScript.Run(ctx, s.client, id.keys[:1], id.argv[:1]...).Int64()
	if err != nil || n == -3 {
		return 0, false, err
	}
	if n < 0 { // the key has no expiry: someone set it by hand
		n = 0
	}
	return time.Duration(n) * time.Millisecond, true, nil
}

func (s single) renew(ctx context.Context, batch []renewal) {
	pending := make([]int, len(batch))
	for i := range pending {
		pending[i] = i
	}
	// A server that restarted (or never ran EXTEND) lacks the script: load
	// it once and send those renewals again, rather than one EVAL each.
	for try := 0; len(pending) > 0; try++ {
		missing := s.renewOnce(ctx, batch, pending)
		if len(missing) == 0 || try == 1 {
			for _, i := range missing {
				batch[i].err = errNoScript
			}
			return
		}
		if err := extendScript.Load(ctx, s.client).Err(); err != nil {
			for _, i := range missing {
				batch[i].err = err
			}
			return
		}
		pending = missing
	}
}

var errNoScript = errors.New("padlock: extend script not loaded")

// renewOnce pipelines the renewals of batch at pending and returns the ones
// the server had no script for.
func (s single) renewOnce(ctx context.Context, batch []renewal, pending []int) (missing []int) {
	cmds := make([]*redis.Cmd, len(pending))
	// Pipelined on a ClusterClient, the commands are grouped by node and
	// sent to the nodes in parallel.
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range pending {
			r := &batch[i]
			cmds[j] = p.EvalSha(ctx, extendScript.Hash(), r.id.keys[:1], r.id.token, r.ttl.Milliseconds())
		}
		return nil
	})
	for j, cmd := range cmds {
		i := pending[j]
		n, err := cmd.Int64()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, i)
			continue
		}
		batch[i].ok, batch[i].err = n == 1, err
	}
	return missing
}
