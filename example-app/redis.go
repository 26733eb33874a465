package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/padlockgo/padlock/internal/miniclock"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
)

// backend is the Redis side of the app: the Locker, and the clients behind
// it for the lock view and health checks.
type backend struct {
	mode    string // a config mode name
	desc    string // for logs and /healthz: "embedded miniredis", ...
	locker  *padlock.Locker
	nodes   []redis.UniversalClient // what /locks scans: one per node, or the Cluster client
	addrs   []string                // Redlock: the nodes' addresses, as nodes
	fenced  bool                    // Lock.Fence gives fences (not on Redlock)
	lockTTL time.Duration           // the default lease, and Redlock's max lease
	embed   *embeddedRedis          // nil unless embedded
}

// connect builds the backend cfg asks for. Its locker uses cfg.lockTTL as
// the lease of every lock.
func connect(ctx context.Context, cfg config, logger *slog.Logger, obs padlock.Observer) (*backend, error) {
	// Every lock names its holder, host and process, for the lock view
	// and for whoever finds a key busy.
	defaults := padlock.Options{TTL: cfg.lockTTL, Owner: processOwner()}
	observe := padlock.WithObserver(obs)
	b := &backend{mode: cfg.RedisMode, fenced: true, lockTTL: cfg.lockTTL}
	switch cfg.RedisMode {
	case modeEmbedded:
		e, err := startEmbeddedRedis()
		if err != nil {
			return nil, fmt.Errorf("starting embedded redis: %w", err)
		}
		b.embed = e
		b.desc = "embedded miniredis"
		rdb := redis.NewClient(&redis.Options{Addr: e.addr()})
		b.nodes = []redis.UniversalClient{rdb}
		b.locker = padlock.New(rdb, padlock.WithDefaults(defaults), observe)
		logger.Info("redis: embedded miniredis, in-process; locks live only as long as this process (set REDIS_ADDR to use real servers)",
			"mode", b.desc, "addr", e.addr())
	case modeSingle:
		rdb := redis.NewClient(&redis.Options{Addr: cfg.RedisAddrs[0]})
		b.desc = "single node"
		b.nodes = []redis.UniversalClient{rdb}
		b.locker = padlock.New(rdb, padlock.WithDefaults(defaults), observe)
		logger.Info("redis: single node", "mode", b.desc, "addr", cfg.RedisAddrs[0])
	case modeCluster:
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.RedisAddrs})
		b.desc = "cluster"
		b.nodes = []redis.UniversalClient{rdb}
		b.locker = padlock.New(rdb, padlock.WithDefaults(defaults), observe)
		logger.Info("redis: cluster", "mode", b.desc, "seeds", cfg.RedisAddrs)
	case modeRedlock:
		clients := make([]redis.UniversalClient, len(cfg.RedisAddrs))
		for i, a := range cfg.RedisAddrs {
			// Redlock bounds each node's answer with a context deadline,
			// which go-redis applies only with ContextTimeoutEnabled.
			clients[i] = redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
		}
		b.desc = "redlock"
		b.nodes = clients
		b.addrs = cfg.RedisAddrs
		b.fenced = false
		opts := []padlock.RedlockOption{padlock.WithDefaults(defaults), padlock.WithNodeTimeout(cfg.nodeTimeout), observe}
		if cfg.persistentNodes {
			opts = append(opts, padlock.WithPersistentNodes())
		}
		l, err := padlock.NewRedlock(clients, opts...)
		if err != nil {
			b.closeClients()
			return nil, err
		}
		b.locker = l
		if cfg.persistentNodes {
			logger.Info("redis: redlock over independent masters, taken to persist every write (REDIS_PERSISTENT_NODES): a node votes as soon as it is up, unless CONFIG GET shows it does not",
				"mode", b.desc, "nodes", cfg.RedisAddrs, "lock_ttl", cfg.lockTTL.String(), "node_timeout", cfg.nodeTimeout.String())
		} else {
			logger.Info("redis: redlock over independent masters; a node votes once it has been up for the lock TTL",
				"mode", b.desc, "nodes", cfg.RedisAddrs, "lock_ttl", cfg.lockTTL.String(), "node_timeout", cfg.nodeTimeout.String())
		}
		logger.Warn("redis: redlock gives no fencing tokens (Fence is 0), so the database cannot reject a stale lock holder's write; payments rely on the lock and the order's status alone")
	default:
		return nil, fmt.Errorf("unknown redis mode %q", cfg.RedisMode)
	}
	if err := b.ping(ctx); err != nil {
		b.close()
		return nil, fmt.Errorf("redis (%s): %w", b.desc, err)
	}
	if b.mode == modeRedlock {
		// Say at once why a fresh set of nodes refuses locks, rather than
		// leave the operator to find out from the first 503.
		if h := b.health(ctx); h.refused != nil {
			logger.Warn("redis: "+h.why, "err", h.refused)
		}
	}
	// A Redis that evicts keys under memory pressure may drop a lock key
	// while its holder still works, and give the lock to another: say so
	// at start (README, "Eviction: run Redis with noeviction"). The app
	// still starts, as a demo; a service may rather refuse to.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := padlock.CheckDeployment(cctx, b.nodes...)
	cancel()
	if errors.Is(err, padlock.ErrEvictingRedis) {
		logger.Warn("redis: set maxmemory-policy noeviction (or no maxmemory): an evicted lock key is a lock two callers hold", "err", err)
	}
	return b, nil
}

// ping checks that every node answers.
func (b *backend) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var errs []error
	for _, n := range b.nodes {
		if err := n.Ping(ctx).Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close stops the Locker, then the clients, then the embedded server.
func (b *backend) close() {
	if b.locker != nil {
		_ = b.locker.Close()
	}
	b.closeClients()
	if b.embed != nil {
		b.embed.close()
	}
}

func (b *backend) closeClients() {
	for _, n := range b.nodes {
		_ = n.Close()
	}
}

// embeddedRedis is a miniredis whose keys expire in real time. miniredis
// only expires keys when told that time has passed (FastForward): without
// its clock (internal/miniclock, as the test packages use), a lease would
// never end and a crashed holder's lock would stay forever.
type embeddedRedis struct {
	m     *miniredis.Miniredis
	clock *miniclock.Clock
}

func startEmbeddedRedis() (*embeddedRedis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return &embeddedRedis{m: m, clock: miniclock.Start(m)}, nil
}

func (e *embeddedRedis) addr() string { return e.m.Addr() }

// close stops the clock, waits for its goroutine, and closes the server.
func (e *embeddedRedis) close() {
	e.clock.Stop()
	e.m.Close()
}

// processOwner names this process for Options.Owner: "host=<name> pid=<n>",
// the host name cut to what Options.Owner allows.
func processOwner() string {
	host, _ := os.Hostname()
	clean := strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '-':
			return r
		}
		return -1
	}, host)
	if len(clean) > 32 {
		clean = clean[:32]
	}
	if clean == "" {
		clean = "unknown"
	}
	return fmt.Sprintf("host=%s pid=%d", clean, os.Getpid())
}
