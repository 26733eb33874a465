package main

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/lockview"
)

// Redis modes, as REDIS_MODE names them.
const (
	modeEmbedded = "embedded"
	modeSingle   = "single"
	modeCluster  = "cluster"
	modeRedlock  = "redlock"
)

const usage = `padlock example app: a small order/payment service guarded by Redis locks.

Usage:
  go run ./example-app

Configuration, all optional, from the environment:
  ADDR        where to listen (default 127.0.0.1:8080)
  REDIS_ADDR  Redis address host:port, or a comma-separated list; each may
              be a URL instead, redis://user:password@host:port/db, or
              rediss://... for TLS (go-redis ParseURL; a Cluster's URLs
              share one user and password)
              (default: none; an embedded, in-process miniredis is started,
              on loopback, with a random password only the app knows)
  REDIS_MODE  single | cluster | redlock: how to use REDIS_ADDR
              (default single for one address, redlock for a list; redlock
              needs independent masters, cluster a Redis Cluster's nodes)
  REDIS_NODE_TIMEOUT  redlock: how long one node may take to answer before
              it counts as down (default 500ms)
  REDIS_PERSISTENT_NODES  redlock: 1 when every node runs appendonly yes
              with appendfsync always, so fresh or restarted nodes vote at
              once (default 0: a node votes once it has been up for the
              lock lease, 10s; until a majority does, locks are refused)
  DB_PATH     SQLite file for orders and charges
              (default: a temp file, removed at exit)
  LOG_FORMAT  text | json (default text)
  SHUTDOWN_GRACE  how long requests in flight get to finish after Ctrl-C or
              SIGTERM before the server ends them with 503 (default 10s; a
              second Ctrl-C exits at once)
  TRUSTED_PROXIES  the reverse proxies (IPs or CIDRs, comma-separated) whose
              X-Forwarded-For header names the client (default: none; the
              client is the connection's peer, and X-Forwarded-For is
              ignored)
  API_KEYS    the callers and their API keys: caller=key,caller=key (keys of
              16 characters or more; default: two demo callers and a demo
              operator with random keys, printed in the log at start)
  OPERATORS   the callers of API_KEYS that may run the fleet-wide jobs,
              comma-separated (default: none; with the demo keys, the
              demo operator); every other caller gets 403 from /jobs
  ADMIN_ADDR  where the admin side listens: the lock page /debug/locks,
              /locks, /healthz with the details the public one keeps to
              itself, and Prometheus /metrics in a build with
              -tags prometheus (default 127.0.0.1:8081; loopback only,
              unless ADMIN_TOKEN is set)
  ADMIN_TOKEN a token the admin side requires as "Authorization: Bearer ...",
              of 32 characters or more (make one: openssl rand -hex 32)
  ADMIN_HOSTS the host names operators use to reach the admin side,
              comma-separated (default: none; it answers to localhost and
              IP addresses only, and to any other Host with 421, so that no
              web page can read it through DNS rebinding)
  LOCK_VIEW_KEYS  1 to show lock keys on the admin side (default: each
              key's namespace and a hash only; keys carry client data)
  LOCK_VIEW_NAMESPACES  namespaces whose keys the admin side and the log
              show as they are, comma-separated, e.g. job (default: none)
  LOCK_KEY_SECRET  the secret that keys the hashes of lock keys, and of
              the callers holding locks, on the admin side and in the
              log, 16 bytes or more, the same for every instance
              (default: random per process, so hashes differ between
              instances and across restarts)

Try it (KEY is an API key, from API_KEYS or printed in the log at start):
  curl -s -X POST localhost:8080/orders -H "Authorization: Bearer $KEY" \
       -H 'Content-Type: application/json' \
       -d '{"customer":"alice","amount_cents":1299,"currency":"EUR"}'
  curl -si -X POST localhost:8080/orders -H "Authorization: Bearer $KEY" \
       -H 'Content-Type: application/json' \
       -H 'Idempotency-Key: "7c9e6679-7425-40de-944b-e07fc1f90ae7"' \
       -d '{"customer":"alice","amount_cents":1299,"currency":"EUR"}'
       (run it twice: the second answer is the first order again, with
       Idempotent-Replayed: true; use a fresh UUID of your own as the key)
  curl -s -X POST localhost:8080/orders/1/pay -H "Authorization: Bearer $KEY"
       (an order is its creator's: with the other demo key, 404)
  curl -s localhost:8080/healthz     (ok, degraded or down)
  curl -s localhost:8081/healthz     (the admin side: what is down, and where)
  curl -s localhost:8081/locks       (the admin side; open
       http://localhost:8081/debug/locks for the live page)
`

// defaultNodeTimeout is the app's Redlock node timeout: five times
// padlock's default (DefaultNodeTimeout, 100ms), so that a node on a
// loaded machine, or across a real network, is not counted as down while
// it answers. It is part of the lease an Acquire may use up: small beside
// the app's 10s lease.
const defaultNodeTimeout = 500 * time.Millisecond

// config is the app's configuration. The exported-looking fields come from
// the environment; the rest are knobs for tests.
type config struct {
	Addr       string
	RedisAddrs []string
	RedisMode  string
	DBPath     string
	LogFormat  string
	APIKeys    apiKeys           // the callers' keys, by digest
	DemoKeys   map[string]string // caller -> key, when APIKeys are the demo's
	Operators  map[string]bool   // the callers that may run jobs (OPERATORS)

	nodeTimeout     time.Duration // Redlock: how long one node may take to answer (REDIS_NODE_TIMEOUT)
	persistentNodes bool          // Redlock: the nodes persist every write (REDIS_PERSISTENT_NODES)

	AdminAddr    string            // the admin listener: lock page, /locks, /metrics
	AdminToken   string            // required as a bearer token on the admin side, if set
	AdminHosts   []string          // Host names the admin side answers to, beside localhost and IP addresses
	LockViewKeys bool              // show lock keys on the admin side, not only their hashes
	KeyRedactor  *lockkey.Redactor // how keys and callers are shown on the admin side and in the log (LOCK_KEY_SECRET, LOCK_VIEW_NAMESPACES); nil: the process's

	lockTTL         time.Duration // lease of every lock the app takes; renewed while held
	payWait         time.Duration // how long a pay request waits for the order's lock
	jobWait         time.Duration // how long a job run waits for the job's lock
	jobDuration     time.Duration // how long a job runs unless ?seconds= says otherwise
	providerLatency time.Duration // how long the fake payment provider takes to authorize
	trustedProxies  []string      // TRUSTED_PROXIES: the proxies whose X-Forwarded-For names the client

	readHeaderTimeout time.Duration // to read a request's line and header fields
	readTimeout       time.Duration // to read a whole request, body included
	writeTimeout      time.Duration // from the end of the header fields to the end of the response
	idleTimeout       time.Duration // a kept-alive connection's wait for its next request

	shutdownTimeout time.Duration // how long in-flight requests get at shutdown (SHUTDOWN_GRACE)
	shutdownAnswer  time.Duration // how long requests ended at shutdown get to send their 503
}

func defaultConfig() config {
	return config{
		Addr:            "127.0.0.1:8080",
		LogFormat:       "text",
		nodeTimeout:     defaultNodeTimeout,
		AdminAddr:       "127.0.0.1:8081",
		lockTTL:         10 * time.Second,
		payWait:         2 * time.Second,
		jobWait:         100 * time.Millisecond,
		jobDuration:     3 * time.Second,
		providerLatency: 50 * time.Millisecond,
		// Bodies are at most 64 KiB: 10s to send one is generous. The
		// longest route is a 30s job: a minute to answer covers it, and
		// ends a client that stops reading its response.
		readHeaderTimeout: 5 * time.Second,
		readTimeout:       10 * time.Second,
		writeTimeout:      60 * time.Second,
		idleTimeout:       60 * time.Second,
		shutdownTimeout:   10 * time.Second,
		shutdownAnswer:    2 * time.Second,
	}
}

// loadConfig reads the configuration from getenv (os.Getenv in main) and
// checks it, naming the variable at fault.
func loadConfig(getenv func(string) string) (config, error) {
	cfg := defaultConfig()
	if v := getenv("ADDR"); v != "" {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return cfg, fmt.Errorf("ADDR: %q is not host:port: %v", v, err)
		}
		cfg.Addr = v
	}
	for a := range strings.SplitSeq(getenv("REDIS_ADDR"), ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, err := nodeOptions(a); err != nil {
			return cfg, fmt.Errorf("REDIS_ADDR: %w", err)
		}
		cfg.RedisAddrs = append(cfg.RedisAddrs, a)
	}
	mode := getenv("REDIS_MODE")
	switch {
	case len(cfg.RedisAddrs) == 0 && mode != "":
		return cfg, fmt.Errorf("REDIS_MODE: %q needs REDIS_ADDR", mode)
	case len(cfg.RedisAddrs) == 0:
		mode = modeEmbedded
	case mode == "" && len(cfg.RedisAddrs) == 1:
		mode = modeSingle
	case mode == "":
		mode = modeRedlock
	case mode == modeSingle && len(cfg.RedisAddrs) > 1:
		return cfg, fmt.Errorf("REDIS_MODE: single takes one address, REDIS_ADDR has %d", len(cfg.RedisAddrs))
	case mode != modeSingle && mode != modeCluster && mode != modeRedlock:
		return cfg, fmt.Errorf("REDIS_MODE: %q, want single, cluster or redlock", mode)
	}
	cfg.RedisMode = mode
	if mode == modeCluster {
		if _, err := clusterOptions(cfg.RedisAddrs); err != nil {
			return cfg, fmt.Errorf("REDIS_ADDR: %w", err)
		}
	}
	if v := getenv("REDIS_NODE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d >= cfg.lockTTL {
			return cfg, fmt.Errorf("REDIS_NODE_TIMEOUT: %q, want a duration above 0 and below the lock lease %v", v, cfg.lockTTL)
		}
		cfg.nodeTimeout = d
	}
	switch v := getenv("REDIS_PERSISTENT_NODES"); v {
	case "", "0", "false":
	case "1", "true":
		cfg.persistentNodes = true
	default:
		return cfg, fmt.Errorf("REDIS_PERSISTENT_NODES: %q, want 1 or 0", v)
	}
	if mode != modeRedlock && (cfg.persistentNodes || getenv("REDIS_NODE_TIMEOUT") != "") {
		return cfg, fmt.Errorf("REDIS_NODE_TIMEOUT and REDIS_PERSISTENT_NODES apply to REDIS_MODE=redlock only")
	}
	if err := loadAdminConfig(&cfg, getenv); err != nil {
		return cfg, err
	}
	cfg.DBPath = getenv("DB_PATH")
	if v := getenv("LOG_FORMAT"); v != "" {
		if v != "text" && v != "json" {
			return cfg, fmt.Errorf("LOG_FORMAT: %q, want text or json", v)
		}
		cfg.LogFormat = v
	}
	if v := getenv("SHUTDOWN_GRACE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return cfg, fmt.Errorf("SHUTDOWN_GRACE: %q, want a duration such as 10s", v)
		}
		cfg.shutdownTimeout = d
	}
	for p := range strings.SplitSeq(getenv("TRUSTED_PROXIES"), ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			return cfg, fmt.Errorf("TRUSTED_PROXIES: %q is neither an IP nor a CIDR", p)
		}
		cfg.trustedProxies = append(cfg.trustedProxies, p)
	}
	if v := getenv("API_KEYS"); v != "" {
		keys, err := parseAPIKeys(v)
		if err != nil {
			return cfg, fmt.Errorf("API_KEYS: %v", err)
		}
		cfg.APIKeys = keys
	} else if getenv("OPERATORS") != "" {
		return cfg, fmt.Errorf("OPERATORS names callers of API_KEYS, which is not set")
	} else {
		cfg.APIKeys, cfg.DemoKeys = demoAPIKeys()
		cfg.Operators = map[string]bool{demoOperator: true}
	}
	ops, err := parseOperators(getenv("OPERATORS"), cfg.APIKeys)
	if err != nil {
		return cfg, fmt.Errorf("OPERATORS: %v", err)
	}
	if len(ops) > 0 {
		cfg.Operators = ops
	}
	return cfg, nil
}

// minAdminTokenLen is the shortest ADMIN_TOKEN accepted: 32 characters,
// as openssl rand -hex 16 gives (128 bits).
const minAdminTokenLen = 32

// loadAdminConfig reads the admin side's variables. The admin side lists
// locks, whose keys carry client data: without a token it may listen on
// loopback only.
func loadAdminConfig(cfg *config, getenv func(string) string) error {
	if v := getenv("ADMIN_ADDR"); v != "" {
		cfg.AdminAddr = v
	}
	cfg.AdminToken = getenv("ADMIN_TOKEN")
	if n := len(cfg.AdminToken); n > 0 && n < minAdminTokenLen {
		return fmt.Errorf("ADMIN_TOKEN: the token has %d characters, want at least %d (a short token can be guessed); make one with: openssl rand -hex 32", n, minAdminTokenLen)
	}
	host, _, err := net.SplitHostPort(cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("ADMIN_ADDR: %q is not host:port: %v", cfg.AdminAddr, err)
	}
	if ip := net.ParseIP(host); cfg.AdminToken == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("ADMIN_ADDR: %q is not a loopback address; set ADMIN_TOKEN to serve the admin side there", cfg.AdminAddr)
	}
	for h := range strings.SplitSeq(getenv("ADMIN_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if err := lockview.CheckAdminHost(h); err != nil {
			return fmt.Errorf("ADMIN_HOSTS: %v", err)
		}
		cfg.AdminHosts = append(cfg.AdminHosts, h)
	}
	switch v := getenv("LOCK_VIEW_KEYS"); v {
	case "", "0":
	case "1":
		cfg.LockViewKeys = true
	default:
		return fmt.Errorf("LOCK_VIEW_KEYS: %q, want 1 or 0", v)
	}
	var redact []lockkey.RedactOption
	if v := getenv("LOCK_KEY_SECRET"); v != "" {
		if len(v) < lockkey.MinRedactSecret {
			return fmt.Errorf("LOCK_KEY_SECRET: %d bytes, want at least %d (e.g. openssl rand -hex 32)", len(v), lockkey.MinRedactSecret)
		}
		redact = append(redact, lockkey.WithRedactSecret([]byte(v)))
	}
	var readable []string
	for ns := range strings.SplitSeq(getenv("LOCK_VIEW_NAMESPACES"), ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			readable = append(readable, ns)
		}
	}
	if len(readable) > 0 {
		redact = append(redact, lockkey.WithReadableNamespaces(readable...))
	}
	if len(redact) > 0 {
		r, err := lockkey.NewRedactor(redact...)
		if err != nil {
			return fmt.Errorf("LOCK_KEY_SECRET or LOCK_VIEW_NAMESPACES: %v", err)
		}
		cfg.KeyRedactor = r
	}
	return nil
}
