package padlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// store is where a Locker's locks live: one Redis deployment (a node, a
// Sentinel-managed master or a Cluster), or a quorum of independent nodes.
// Each method is one attempt; waiting, renewal and signalling are the
// Locker's.
type store interface {
	// acquire takes the lock for token with a lease of ttl. It returns the
	// new fence (> 0) on success; otherwise fence is 0 and holderTTL is the
	// holder's remaining lease (0 when unknown).
	acquire(ctx context.Context, k lockKeys, token string, ttl time.Duration) (fence int64, holderTTL time.Duration, err error)
	// release deletes the lock if token holds it; ok reports whether it did.
	release(ctx context.Context, k lockKeys, token string) (ok bool, err error)
	// extend resets the lease to ttl if token holds the lock.
	extend(ctx context.Context, k lockKeys, token string, ttl time.Duration) (ok bool, err error)
	// pttl returns the remaining lease if token holds the lock.
	pttl(ctx context.Context, k lockKeys, token string) (d time.Duration, ok bool, err error)
}

// lockKeys are the Redis keys of one lock, computed once per Acquire.
type lockKeys struct {
	lock  string // the lock itself
	fence string // its slot's fence counter
}

// single is the store on one Redis deployment reached through go-redis:
// a single node, a Sentinel failover client or a Cluster client. Every
// script touches keys of one hash slot, so Cluster routes it to one node.
type single struct {
	client redis.UniversalClient
}

func (s single) acquire(ctx context.Context, k lockKeys, token string, ttl time.Duration) (int64, time.Duration, error) {
	n, err := acquireScript.Run(ctx, s.client, []string{k.lock, k.fence}, token, ttl.Milliseconds()).Int64()
	if err != nil {
		return 0, 0, err
	}
	if n > 0 {
		return n, 0, nil
	}
	return 0, time.Duration(-1-n) * time.Millisecond, nil
}

func (s single) release(ctx context.Context, k lockKeys, token string) (bool, error) {
	n, err := releaseScript.Run(ctx, s.client, []string{k.lock}, token).Int64()
	return n == 1, err
}

func (s single) extend(ctx context.Context, k lockKeys, token string, ttl time.Duration) (bool, error) {
	n, err := extendScript.Run(ctx, s.client, []string{k.lock}, token, ttl.Milliseconds()).Int64()
	return n == 1, err
}

func (s single) pttl(ctx context.Context, k lockKeys, token string) (time.Duration, bool, error) {
	n, err := pttlScript.Run(ctx, s.client, []string{k.lock}, token).Int64()
	if err != nil || n == -3 {
		return 0, false, err
	}
	if n < 0 { // no expiry (-1) or gone between GET and PTTL (impossible in a script)
		n = 0
	}
	return time.Duration(n) * time.Millisecond, true, nil
}
