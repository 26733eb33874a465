package main

import (
	"fmt"
	"net"
	"strings"
	"time"
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
  REDIS_ADDR  Redis address host:port, or a comma-separated list
              (default: none; an embedded, in-process miniredis is started)
  REDIS_MODE  single | cluster | redlock: how to use REDIS_ADDR
              (default single for one address, redlock for a list; redlock
              needs independent masters, cluster a Redis Cluster's nodes)
  DB_PATH     SQLite file for orders and charges
              (default: a temp file, removed at exit)
  LOG_FORMAT  text | json (default text)
  ADMIN_ADDR  where the admin side listens: the lock page /debug/locks,
              /locks and Prometheus /metrics (default 127.0.0.1:8081;
              loopback only, unless ADMIN_TOKEN is set)
  ADMIN_TOKEN a token the admin side requires as "Authorization: Bearer ..."
  LOCK_VIEW_KEYS  1 to show lock keys on the admin side (default: each
              key's namespace and a hash only; keys carry client data)

Try it:
  curl -s -X POST localhost:8080/orders -H 'Content-Type: application/json' \
       -d '{"customer":"alice","amount_cents":1299,"currency":"EUR"}'
  curl -si -X POST localhost:8080/orders -H 'Content-Type: application/json' \
       -H 'Idempotency-Key: "order-alice-1"' -H 'X-Client-ID: shop-1' \
       -d '{"customer":"alice","amount_cents":1299,"currency":"EUR"}'
       (run it twice: the second answer is the first order again,
       with Idempotent-Replayed: true)
  curl -s -X POST localhost:8080/orders/1/pay
  curl -s localhost:8081/locks       (the admin side; open
       http://localhost:8081/debug/locks for the live page)
`

// config is the app's configuration. The exported-looking fields come from
// the environment; the rest are knobs for tests.
type config struct {
	Addr       string
	RedisAddrs []string
	RedisMode  string
	DBPath     string
	LogFormat  string

	AdminAddr    string // the admin listener: lock page, /locks, /metrics
	AdminToken   string // required as a bearer token on the admin side, if set
	LockViewKeys bool   // show lock keys on the admin side, not only their hashes

	lockTTL         time.Duration // lease of every lock the app takes; renewed while held
	payWait         time.Duration // how long a pay request waits for the order's lock
	jobWait         time.Duration // how long a job run waits for the job's lock
	jobDuration     time.Duration // how long a job runs unless ?seconds= says otherwise
	providerLatency time.Duration // how long the fake payment provider takes to authorize
	shutdownTimeout time.Duration // how long in-flight requests get at shutdown
}

func defaultConfig() config {
	return config{
		Addr:            "127.0.0.1:8080",
		LogFormat:       "text",
		AdminAddr:       "127.0.0.1:8081",
		lockTTL:         10 * time.Second,
		payWait:         2 * time.Second,
		jobWait:         100 * time.Millisecond,
		jobDuration:     3 * time.Second,
		providerLatency: 50 * time.Millisecond,
		shutdownTimeout: 10 * time.Second,
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
		if _, _, err := net.SplitHostPort(a); err != nil {
			return cfg, fmt.Errorf("REDIS_ADDR: %q is not host:port: %v", a, err)
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
	return cfg, nil
}

// loadAdminConfig reads the admin side's variables. The admin side lists
// locks, whose keys carry client data: without a token it may listen on
// loopback only.
func loadAdminConfig(cfg *config, getenv func(string) string) error {
	if v := getenv("ADMIN_ADDR"); v != "" {
		cfg.AdminAddr = v
	}
	cfg.AdminToken = getenv("ADMIN_TOKEN")
	host, _, err := net.SplitHostPort(cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("ADMIN_ADDR: %q is not host:port: %v", cfg.AdminAddr, err)
	}
	if ip := net.ParseIP(host); cfg.AdminToken == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("ADMIN_ADDR: %q is not a loopback address; set ADMIN_TOKEN to serve the admin side there", cfg.AdminAddr)
	}
	switch v := getenv("LOCK_VIEW_KEYS"); v {
	case "", "0":
	case "1":
		cfg.LockViewKeys = true
	default:
		return fmt.Errorf("LOCK_VIEW_KEYS: %q, want 1 or 0", v)
	}
	return nil
}
