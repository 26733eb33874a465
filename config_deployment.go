package padlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrEvictingRedis reports a Redis node that may evict lock keys under
// memory pressure: maxmemory is set and maxmemory-policy is not
// noeviction. CheckDeployment returns it.
var ErrEvictingRedis = errors.New("padlock: redis may evict lock keys")

// ErrUnchecked reports a Redis node whose eviction settings CheckDeployment
// could not read: the node refused CONFIG GET (an ACL user without
// +config|get, a managed Redis that renames or disables CONFIG), or did not
// say what its maxmemory-policy is. Whether that node may evict lock keys
// is unknown, which is neither a good deployment nor a bad one: check the
// node's settings another way, or let the check read them.
var ErrUnchecked = errors.New("padlock: redis eviction settings could not be read")

// CheckDeployment checks that the Redis nodes behind clients, the clients
// given to New or NewRedlock, cannot evict lock keys: it reads maxmemory
// and maxmemory-policy with CONFIG GET on every node (every master of a
// Cluster, every shard of a Ring, the current master behind a Sentinel
// client) and returns an error matching ErrEvictingRedis that names each
// node with maxmemory > 0 and a policy other than noeviction.
//
// Eviction breaks mutual exclusion: a lock key dropped to free memory is a
// lock the next caller gets while its holder still works. Every lock key
// has a TTL, so the volatile-* policies, which evict only keys with a TTL,
// pick lock keys first, and the allkeys-* policies may pick them at any
// time. Run the Redis that holds locks with maxmemory-policy noeviction
// (a full Redis then refuses writes, which padlock reports as
// ErrUnavailable, never as a lock held twice), or with no maxmemory.
//
// A node that refuses CONFIG (an ACL without +config, a managed Redis that
// renames the command) gives an error matching ErrUnchecked, naming the
// node and what it refused: "could not look" is not "fine", and the caller
// decides (log it, check the node by hand, or refuse to start). A node
// that cannot be reached is an error matching ErrUnavailable. Every node
// is checked whatever the others say, and the errors are joined, so one
// error may match several of these. Call it at start-up, and log or
// refuse to start on an error, as the deployment requires; padlock never
// calls it itself.
func CheckDeployment(ctx context.Context, clients ...redis.UniversalClient) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	check := func(ctx context.Context, c *redis.Client) error {
		if err := checkEviction(ctx, c); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil // check every node, whatever one of them says
	}
	for _, client := range clients {
		switch c := client.(type) {
		case nil:
		case *redis.ClusterClient:
			// Replicas do not evict on their own: they replay their
			// master's deletions.
			if err := c.ForEachMaster(ctx, check); err != nil {
				errs = append(errs, fmt.Errorf("%w: CheckDeployment: listing the Cluster's masters: %w", ErrUnavailable, err))
			}
		case *redis.Ring:
			if err := c.ForEachShard(ctx, check); err != nil {
				errs = append(errs, fmt.Errorf("%w: CheckDeployment: listing the Ring's shards: %w", ErrUnavailable, err))
			}
		case *redis.Client:
			_ = check(ctx, c)
		default:
			errs = append(errs, fmt.Errorf("padlock: CheckDeployment: cannot reach the nodes of a %T", client))
		}
	}
	return errors.Join(errs...)
}

// checkEviction checks the node c talks to.
func checkEviction(ctx context.Context, c *redis.Client) error {
	node := c.Options().Addr
	cfg, err := c.ConfigGet(ctx, "maxmemory*").Result()
	var rerr redis.Error
	switch {
	case errors.As(err, &rerr): // NOPERM, or CONFIG renamed or disabled
		return fmt.Errorf("%w: node %s refused CONFIG GET maxmemory* (%w), so whether it may evict lock keys "+
			"is unknown; allow the check +config|get, or make sure by hand that maxmemory-policy is noeviction", ErrUnchecked, node, err)
	case err != nil:
		return fmt.Errorf("%w: CheckDeployment: node %s: %w", ErrUnavailable, node, err)
	}
	policy, hasPolicy := cfg["maxmemory-policy"]
	maxmemory, merr := strconv.ParseInt(cfg["maxmemory"], 10, 64)
	if !hasPolicy || policy == "" || merr != nil {
		return fmt.Errorf("%w: node %s answered CONFIG GET maxmemory* without a maxmemory-policy and a maxmemory "+
			"(got %d settings), so whether it may evict lock keys is unknown", ErrUnchecked, node, len(cfg))
	}
	if maxmemory <= 0 || policy == "noeviction" {
		return nil
	}
	return fmt.Errorf("%w: node %s has maxmemory %d and maxmemory-policy %s, which can drop a held lock "+
		"and hand it to another caller; set maxmemory-policy noeviction", ErrEvictingRedis, node, maxmemory, policy)
}
