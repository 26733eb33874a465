package padlock

import (
	"strings"
	"time"
)

// How a Locker is configured: the option types of New and NewRedlock,
// every option, and their validation. Each constructor takes only the
// options that fit it, so an option for the other one does not compile:
//
//	SharedOption    New and NewRedlock: WithDefaults, WithKeyPrefix, WithClockDrift
//	LockerOption    New: the shared ones and WithReplicaAck
//	RedlockOption   NewRedlock: the shared ones and WithNodeTimeout,
//	                WithMaxLease, WithPersistentNodes

// A LockerOption configures a Locker built by New: a SharedOption, or
// WithReplicaAck.
type LockerOption interface{ applyLocker(*config) }

// A RedlockOption configures a Locker built by NewRedlock: a SharedOption,
// or WithNodeTimeout, WithMaxLease or WithPersistentNodes.
type RedlockOption interface{ applyRedlock(*config) }

// A SharedOption configures a Locker built by either constructor: it is a
// LockerOption and a RedlockOption both. Only the With functions make one.
type SharedOption struct{ set func(*config) }

func (o SharedOption) applyLocker(c *config)  { o.set(c) }
func (o SharedOption) applyRedlock(c *config) { o.set(c) }

// lockerOnly is an option that fits New only.
type lockerOnly func(*config)

func (o lockerOnly) applyLocker(c *config) { o(c) }

// redlockOnly is an option that fits NewRedlock only.
type redlockOnly func(*config)

func (o redlockOnly) applyRedlock(c *config) { o(c) }

type config struct {
	prefix      string
	defaults    Options
	driftFactor float64
	driftFixed  time.Duration

	// NewRedlock only.
	redlock     bool          // fences are not offered
	nodeTimeout time.Duration // 0: DefaultNodeTimeout
	maxLease    time.Duration // 0: the default TTL
	persistent  bool          // WithPersistentNodes

	// WithReplicaAck (New only).
	ackReplicas int
	ackTimeout  time.Duration

	observer Observer // WithObserver; nil: no events are built
}

func defaultConfig() config {
	return config{prefix: DefaultKeyPrefix, driftFactor: 0.01, driftFixed: 2 * time.Millisecond}
}

// lockerConfig returns the configuration opts give a Locker built by New,
// or the first invalid option.
func lockerConfig(opts []LockerOption) (config, error) {
	cfg := defaultConfig()
	for _, opt := range opts {
		opt.applyLocker(&cfg)
	}
	if err := cfg.validateShared(); err != nil {
		return cfg, err
	}
	return cfg, cfg.validateReplicaAck()
}

// redlockConfig returns the configuration opts give a Locker built by
// NewRedlock, with its defaults filled in, or the first invalid option.
func redlockConfig(opts []RedlockOption) (config, error) {
	cfg := defaultConfig()
	for _, opt := range opts {
		opt.applyRedlock(&cfg)
	}
	cfg.redlock = true
	if cfg.nodeTimeout == 0 {
		cfg.nodeTimeout = DefaultNodeTimeout
	}
	if cfg.maxLease == 0 {
		cfg.maxLease = Options{}.withDefaults(cfg.defaults).TTL
	}
	if err := cfg.validateShared(); err != nil {
		return cfg, err
	}
	return cfg, cfg.validateRedlock()
}

// WithKeyPrefix sets the prefix of every Redis key and channel the Locker
// uses, keeping lock keys apart from the application's own keys. It must not
// contain '{' or '}', which would change the keys' Cluster hash slots.
// Default: "padlock:".
func WithKeyPrefix(prefix string) SharedOption {
	return SharedOption{func(c *config) { c.prefix = prefix }}
}

// WithDefaults sets the Options used for fields a call to Acquire leaves at
// zero. NoRenew set here applies to every lock. Default: the zero Options.
func WithDefaults(o Options) SharedOption {
	return SharedOption{func(c *config) { c.defaults = o }}
}

// WithClockDrift sets how much of a lease padlock does not trust: a lock is
// taken as valid until factor·TTL + fixed before its lease would end, counted
// from when the acquiring (or renewing) command was sent. The lock-lost
// signal fires at that point, so it comes before the lease can run out on
// Redis even if clocks run at slightly different rates. Default: 0.01 and
// 2ms, as in the Redlock algorithm.
func WithClockDrift(factor float64, fixed time.Duration) SharedOption {
	return SharedOption{func(c *config) { c.driftFactor, c.driftFixed = factor, fixed }}
}

// margin is the part of a lease of ttl that is not trusted.
func (c config) margin(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*c.driftFactor) + c.driftFixed
}

// validateShared checks the options both constructors take.
func (c config) validateShared() error {
	if strings.ContainsAny(c.prefix, "{}") {
		return invalid("WithKeyPrefix", "must not contain '{' or '}', got %q", c.prefix)
	}
	if c.driftFactor < 0 || c.driftFactor >= 0.5 || c.driftFixed < 0 {
		return invalid("WithClockDrift", "factor must be in [0, 0.5) and fixed not negative, got %v and %v", c.driftFactor, c.driftFixed)
	}
	if err := c.defaults.Validate(); err != nil {
		return invalid("WithDefaults", "%v", err)
	}
	return nil
}

// WithReplicaAck makes a Locker (New) wait, after each write that takes or
// keeps a lock, until at least replicas replicas of the master confirm they
// have it (Redis WAIT), for up to timeout.
//
// Replication in Redis is asynchronous: a master can grant a lock and fail
// before any replica has seen it, and then Sentinel or Cluster promotes a
// replica on which the key is free, so a second owner takes it while the
// first still works under it. With WithReplicaAck, Acquire treats an
// acquisition no replica confirmed as failed: it releases the lock and
// returns an ErrUnavailable error saying so, instead of handing out a lock
// a failover may silently lose. Extend and renewals are confirmed too; an
// unconfirmed one counts as Redis not answering, so a lock whose renewals
// stay unconfirmed is lost when its trusted lease runs out.
//
// The confirmation shares the round trip of the write (the same connection,
// pipelined), but it adds the time the replicas take, and blocks until
// timeout while too few are connected. This narrows the failover hazard; it
// does not close it: a failover may still promote a replica that did not
// confirm, when fewer replicas than exist were required. Require as many as
// a failover may choose from (often all), or use NewRedlock.
//
// replicas must be at least 1 and timeout at least 1ms and shorter than the
// client's ReadTimeout, or New panics. Default: off. A Redlock Locker
// survives the loss of a node by its majority instead, so NewRedlock does
// not take it.
func WithReplicaAck(replicas int, timeout time.Duration) LockerOption {
	return lockerOnly(func(c *config) { c.ackReplicas, c.ackTimeout = replicas, timeout })
}

func (c config) validateReplicaAck() error {
	if c.ackReplicas == 0 && c.ackTimeout == 0 {
		return nil
	}
	switch {
	case c.ackReplicas < 1:
		return invalid("WithReplicaAck", "replicas must be at least 1, got %d", c.ackReplicas)
	case c.ackTimeout < time.Millisecond:
		// WAIT with a timeout of 0 would block for ever.
		return invalid("WithReplicaAck", "timeout must be at least 1ms, got %v", c.ackTimeout)
	}
	return nil
}

// DefaultNodeTimeout is how long a Redlock Locker waits for one node to
// answer, unless WithNodeTimeout says otherwise.
const DefaultNodeTimeout = 100 * time.Millisecond

// WithNodeTimeout sets how long a Redlock Locker (NewRedlock) waits for one
// node to answer one request: every node gets the same deadline, counted
// from when the request went out to all of them. A node that answers later
// counts as down. Keep it far below the TTL: it is part of the lease that
// an Acquire may use up. Default: 100ms (DefaultNodeTimeout).
func WithNodeTimeout(d time.Duration) RedlockOption {
	return redlockOnly(func(c *config) { c.nodeTimeout = d })
}

// WithMaxLease sets the longest lease any owner sets on the nodes of a
// Redlock Locker (NewRedlock): Acquire and Extend reject a longer TTL, and a
// node that restarted does not vote until it has been up this long (see
// "Delayed restart" in the package documentation). Give every Locker that
// shares the nodes the same value. Below 30s, set a default TTL within it
// too (WithDefaults), or every Acquire must name its TTL. Default: the
// Locker's default TTL (30s unless WithDefaults sets another).
func WithMaxLease(d time.Duration) RedlockOption {
	return redlockOnly(func(c *config) { c.maxLease = d })
}

// WithPersistentNodes tells a Redlock Locker (NewRedlock) that its nodes
// write every command to disk before they answer (appendonly yes with
// appendfsync always), so that a node that restarts still holds every
// lock it granted, and its grants count at once instead of after the max
// lease (the delayed-restart rule, see the package documentation). A new
// deployment then takes locks as soon as its nodes are up.
//
// Where the clients may run CONFIG GET, each node's settings are checked
// whenever the restart rule would read its uptime (after the client
// dialled it anew), and a node that does not persist every write is held
// to the rule all the same; its result in a QuorumError says why. Where
// CONFIG GET is refused (managed Redis, ACLs), the option is the caller's
// promise: a node that breaks it may, after a restart, grant a lock its
// old process had granted to another owner. Other ways to lose writes
// break it too: a restore from an older snapshot, a disk that lies about
// fsync, or a wall clock stepped forward across the restart (Redis stores
// lease ends as wall-clock times in the AOF). Default: off.
func WithPersistentNodes() RedlockOption {
	return redlockOnly(func(c *config) { c.persistent = true })
}

// validateRedlock checks the options only NewRedlock takes, and what a
// Redlock Locker asks of the shared ones.
func (c config) validateRedlock() error {
	switch {
	case c.nodeTimeout <= 0:
		return invalid("WithNodeTimeout", "must be positive, got %v", c.nodeTimeout)
	case c.maxLease < time.Millisecond:
		return invalid("WithMaxLease", "must be at least 1ms, got %v", c.maxLease)
	case c.nodeTimeout >= c.maxLease:
		return invalid("WithNodeTimeout", "must be shorter than the max lease %v, got %v", c.maxLease, c.nodeTimeout)
	case c.defaults.Fair:
		return invalid("WithDefaults", "Fair is not supported by NewRedlock")
	case c.defaults.TTL > c.maxLease:
		return invalid("WithDefaults", "TTL %v exceeds the max lease %v (WithMaxLease)", c.defaults.TTL, c.maxLease)
	}
	return nil
}

// checkLease rejects a lease longer than a Redlock Locker's max lease; field
// names the argument that set it.
func (c config) checkLease(field string, ttl time.Duration) error {
	if c.maxLease > 0 && ttl > c.maxLease {
		return invalid(field, "%v exceeds the max lease %v of this Redlock Locker (WithMaxLease)", ttl, c.maxLease)
	}
	return nil
}
