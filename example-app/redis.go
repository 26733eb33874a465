package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
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
	addrs   []string                // Redlock: the nodes' host:port, as nodes; never their credentials
	fenced  bool                    // Lock.Fence gives fences (not on Redlock)
	lockTTL time.Duration           // the default lease, and Redlock's max lease
	// nodeTimeout is how long a Redlock node may take to answer, a
	// health check's PING too (REDIS_NODE_TIMEOUT).
	nodeTimeout time.Duration
	embed       *embeddedRedis // nil unless embedded
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
		if err := b.lockOn(redis.NewClient(e.options()), padlock.WithDefaults(defaults), observe); err != nil {
			return nil, err
		}
		logger.Info("redis: embedded miniredis, in-process, on loopback with a password of its own; locks live only as long as this process (set REDIS_ADDR to use real servers)",
			"mode", b.desc, "addr", e.addr())
	case modeSingle:
		o, err := nodeOptions(cfg.RedisAddrs[0])
		if err != nil {
			return nil, fmt.Errorf("REDIS_ADDR: %w", err)
		}
		b.desc = "single node"
		if err := b.lockOn(redis.NewClient(o), padlock.WithDefaults(defaults), observe); err != nil {
			return nil, err
		}
		logger.Info("redis: single node", "mode", b.desc, "addr", o.Addr, "tls", o.TLSConfig != nil, "auth", o.Password != "")
	case modeCluster:
		o, err := clusterOptions(cfg.RedisAddrs)
		if err != nil {
			return nil, fmt.Errorf("REDIS_ADDR: %w", err)
		}
		b.desc = "cluster"
		if err := b.lockOn(redis.NewClusterClient(o), padlock.WithDefaults(defaults), observe); err != nil {
			return nil, err
		}
		logger.Info("redis: cluster", "mode", b.desc, "seeds", o.Addrs, "tls", o.TLSConfig != nil, "auth", o.Password != "")
	case modeRedlock:
		clients := make([]redis.UniversalClient, len(cfg.RedisAddrs))
		b.addrs = make([]string, len(cfg.RedisAddrs))
		tlsAll, authAll := true, true
		for i, a := range cfg.RedisAddrs {
			o, err := nodeOptions(a)
			if err != nil {
				b.closeClients()
				return nil, fmt.Errorf("REDIS_ADDR: %w", err)
			}
			// Redlock bounds each node's answer with a context deadline,
			// which go-redis applies only with ContextTimeoutEnabled
			// (nodeOptions sets it).
			clients[i] = redis.NewClient(o)
			b.nodes = clients[:i+1]
			b.addrs[i] = o.Addr
			tlsAll = tlsAll && o.TLSConfig != nil
			authAll = authAll && o.Password != ""
		}
		b.desc = "redlock"
		b.fenced = false
		b.nodeTimeout = cfg.nodeTimeout
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
				"mode", b.desc, "nodes", b.addrs, "lock_ttl", cfg.lockTTL.String(), "node_timeout", cfg.nodeTimeout.String(), "tls", tlsAll, "auth", authAll)
		} else {
			logger.Info("redis: redlock over independent masters; a node votes once it has been up for the lock TTL",
				"mode", b.desc, "nodes", b.addrs, "lock_ttl", cfg.lockTTL.String(), "node_timeout", cfg.nodeTimeout.String(), "tls", tlsAll, "auth", authAll)
		}
		logger.Warn("redis: redlock gives no fencing tokens (Fence is 0), so the database cannot reject a stale lock holder's write; payments rely on the lock and the order's status alone")
	default:
		return nil, fmt.Errorf("unknown redis mode %q", cfg.RedisMode)
	}
	pctx, pcancel := context.WithTimeout(ctx, startupPingTimeout)
	err := b.ping(pctx)
	pcancel()
	if err != nil {
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
	// at start (docs/cluster-sentinel.md, "Eviction"). The app
	// still starts, as a demo; a service may rather refuse to.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = padlock.CheckDeployment(cctx, b.nodes...)
	cancel()
	switch {
	case errors.Is(err, padlock.ErrEvictingRedis):
		logger.Warn("redis: set maxmemory-policy noeviction (or no maxmemory): an evicted lock key is a lock two callers hold", "err", err)
	case errors.Is(err, padlock.ErrUnchecked) && b.embed == nil: // miniredis has no CONFIG, and never evicts
		logger.Warn("redis: could not check maxmemory-policy (grant +config to the app's user, or check that it is noeviction by hand)", "err", err)
	}
	return b, nil
}

// startupPingTimeout bounds the PINGs that check, at start, that every
// node answers: a fresh node on a loaded machine once took longer than
// 2 s to, and the app refused to start.
const startupPingTimeout = 5 * time.Second

// ping checks that every node answers before ctx ends, asking them all
// at once.
func (b *backend) ping(ctx context.Context) error {
	errs := make([]error, len(b.nodes))
	var wg sync.WaitGroup
	for i, n := range b.nodes {
		wg.Go(func() { errs[i] = n.Ping(ctx).Err() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// close stops the Locker, then the clients, then the embedded server.
// lockOn makes b's Locker on rdb, b's one client. When New refuses rdb
// it closes what b holds and returns the error.
func (b *backend) lockOn(rdb redis.UniversalClient, opts ...padlock.LockerOption) error {
	b.nodes = []redis.UniversalClient{rdb}
	l, err := padlock.New(rdb, opts...)
	if err != nil {
		b.close()
		return fmt.Errorf("redis (%s): %w", b.desc, err)
	}
	b.locker = l
	return nil
}

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
//
// It listens on a loopback port, where every user and process of the
// machine may connect: it requires a password, made at random when it
// starts and known only to this process (never logged), so that nobody
// else can read the app's idempotency answers or take and drop its locks.
type embeddedRedis struct {
	m        *miniredis.Miniredis
	clock    *miniclock.Clock
	password string
}

func startEmbeddedRedis() (*embeddedRedis, error) {
	m := miniredis.NewMiniRedis()
	password := rand.Text() // 26 base32 characters: 130 random bits
	m.RequireAuth(password)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return &embeddedRedis{m: m, clock: miniclock.Start(m), password: password}, nil
}

func (e *embeddedRedis) addr() string { return e.m.Addr() }

// options returns the go-redis options that reach the embedded server.
func (e *embeddedRedis) options() *redis.Options {
	return &redis.Options{Addr: e.addr(), Password: e.password, ContextTimeoutEnabled: true}
}

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

// nodeOptions reads one entry of REDIS_ADDR: host:port, or a redis:// or
// rediss:// (TLS) URL as go-redis's ParseURL reads it, with a user and
// password, a database number and go-redis's query options:
// rediss://app:secret@redis.internal:6380/0?dial_timeout=3s, always with
// ContextTimeoutEnabled. Its errors never quote a URL's password.
func nodeOptions(entry string) (*redis.Options, error) {
	scheme, _, isURL := strings.Cut(entry, "://")
	if !isURL {
		if _, _, err := net.SplitHostPort(entry); err != nil {
			if at := strings.LastIndex(entry, "@"); at >= 0 {
				// user:password@host:port, the scheme forgotten
				return nil, fmt.Errorf("%q is not host:port; a user and password go in a URL, redis://user:password@host:port", "***"+entry[at:])
			}
			return nil, fmt.Errorf("%q is not host:port, nor a redis:// or rediss:// URL: %v", entry, err)
		}
		return &redis.Options{Addr: entry, ContextTimeoutEnabled: true}, nil
	}
	if scheme != "redis" && scheme != "rediss" {
		return nil, fmt.Errorf("a URL of scheme %q, want redis:// or rediss:// (TLS)", scheme)
	}
	o, err := redis.ParseURL(entry)
	if err != nil {
		// url.Parse's errors quote the whole URL, password and all.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("%s is not a valid Redis URL: %v", redactURL(entry), err)
	}
	// Deadlines reach the socket, so a Redis that hangs cannot hold a
	// request past its lock's wait (a URL cannot set it).
	o.ContextTimeoutEnabled = true
	return o, nil
}

// redactURL returns a URL entry with its user information replaced, for
// error messages.
func redactURL(entry string) string {
	scheme, rest, _ := strings.Cut(entry, "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "***@" + rest[at+1:]
	}
	return scheme + "://" + rest
}

// clusterOptions reads REDIS_ADDR for a Cluster: each entry a seed node,
// as host:port or a URL (see nodeOptions). A Cluster client logs in to
// every node with one user and password, over TLS or not, and uses
// database 0: entries that are URLs must agree on those, and the first
// URL's options apply to every node.
func clusterOptions(entries []string) (*redis.ClusterOptions, error) {
	co := &redis.ClusterOptions{ContextTimeoutEnabled: true}
	var first *redis.Options
	for _, e := range entries {
		o, err := nodeOptions(e)
		if err != nil {
			return nil, err
		}
		co.Addrs = append(co.Addrs, o.Addr)
		if !strings.Contains(e, "://") {
			continue
		}
		if o.DB != 0 {
			return nil, fmt.Errorf("%s: a Cluster has database 0 only", redactURL(e))
		}
		if first == nil {
			first = o
			continue
		}
		if o.Username != first.Username || o.Password != first.Password || (o.TLSConfig == nil) != (first.TLSConfig == nil) {
			return nil, fmt.Errorf("%s: the URLs of a Cluster's nodes must share one user, password and scheme", redactURL(e))
		}
	}
	if first != nil {
		co.Username, co.Password = first.Username, first.Password
		if first.TLSConfig != nil {
			// Without a ServerName, each node's certificate is checked
			// against the host it is dialled at, not the first seed's.
			co.TLSConfig = first.TLSConfig.Clone()
			co.TLSConfig.ServerName = ""
		}
		co.DialTimeout, co.ReadTimeout, co.WriteTimeout = first.DialTimeout, first.ReadTimeout, first.WriteTimeout
		co.PoolSize, co.MinIdleConns, co.MaxRetries = first.PoolSize, first.MinIdleConns, first.MaxRetries
		co.ClientName = first.ClientName
	}
	return co, nil
}
