package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/padlockgo/padlock/internal/redistest"
)

// redlockConfig is testConfig on three fresh, independent redis-servers in
// Redlock mode; persistent makes them append and fsync every write, and
// tells the app so (REDIS_PERSISTENT_NODES).
func redlockConfig(t *testing.T, persistent bool) (config, []*redistest.Server) {
	t.Helper()
	redistest.Require(t)
	cfg := testConfig(t)
	srvs := redistest.StartN(t, 3)
	cfg.RedisAddrs = nil
	for _, s := range srvs {
		cfg.RedisAddrs = append(cfg.RedisAddrs, s.Addr())
		if persistent {
			rdb := s.Client(t)
			for _, kv := range [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}} {
				if err := rdb.ConfigSet(context.Background(), kv[0], kv[1]).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cfg.RedisMode = modeRedlock
	cfg.persistentNodes = persistent
	return cfg, srvs
}

// Freshly started nodes do not vote until they have been up for the max
// lease (the app's lease): until then, a client's 503 and the log say
// so, and when locking can start (Retry-After), instead of "unavailable";
// /healthz says the same.
func TestRedlockFreshNodesSayWhy(t *testing.T) {
	cfg, _ := redlockConfig(t, false)
	// A lease long enough that the nodes surely do not vote yet when the
	// test asks, however slowly a loaded machine starts the app.
	cfg.lockTTL = time.Minute
	url, logs, stop := bootRun(t, cfg)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	const why = "have been up for less than the max lease (1m0s)"
	if !strings.Contains(logs.String(), why) {
		t.Fatalf("the log at start does not say why locks are refused (%q):\n%s", why, logs)
	}
	// An order of the caller's, so that its pay request reaches the lock.
	if r := do(t, c, "POST", url+"/orders", `{"customer":"alice","amount_cents":1299,"currency":"EUR"}`); r.status != http.StatusCreated {
		t.Fatalf("create: got %d %s, want 201", r.status, r.raw)
	}
	for _, req := range []struct{ method, path string }{{"POST", "/jobs/nightly-report/run"}, {"POST", "/orders/1/pay"}, {"GET", "/healthz"}} {
		r := do(t, c, req.method, url+req.path, "")
		checkProblem(t, r, http.StatusServiceUnavailable)
		ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if d, _ := r.body["detail"].(string); !strings.Contains(d, why) || ra < 1 || ra > 63 {
			t.Fatalf("%s %s: got %s (Retry-After %q), want a detail saying nodes %s, and Retry-After within the lease",
				req.method, req.path, r.raw, r.header.Get("Retry-After"), why)
		}
		if strings.Contains(r.raw, cfg.RedisAddrs[0]) {
			t.Fatalf("%s %s: got %s, want the nodes' addresses kept from clients", req.method, req.path, r.raw)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"lock unavailable: the lock service cannot lock yet`); n != 1 {
		t.Fatalf("got %d pay refusals logged with the reason, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "votes in") {
		t.Fatalf("the log lacks the engine's error naming each node's wait:\n%s", logs)
	}
}

// Nodes that append and fsync every write, declared so
// (REDIS_PERSISTENT_NODES), vote as soon as they are up: a fresh
// deployment locks at once.
func TestRedlockPersistentNodes(t *testing.T) {
	cfg, _ := redlockConfig(t, true)
	_, ts := startApp(t, cfg)
	if r := do(t, ts.Client(), "POST", ts.URL+"/jobs/nightly-report/run?seconds=0.1", ""); r.status != http.StatusOK {
		t.Fatalf("job on fresh persistent nodes: got %d %s, want 200", r.status, r.raw)
	}
}

// /healthz on Redlock: every node up is ok; a minority down is degraded
// but working (200, locks are taken); a majority down is 503.
func TestHealthzRedlockDegraded(t *testing.T) {
	cfg, srvs := redlockConfig(t, true)
	_, ts := startApp(t, cfg)
	c := ts.Client()
	check := func(wantStatus int, wantState string, wantUp float64) {
		t.Helper()
		r := do(t, c, "GET", ts.URL+"/healthz", "")
		if wantStatus != http.StatusOK {
			checkProblem(t, r, wantStatus)
			return
		}
		if r.status != wantStatus || r.body["status"] != wantState || r.body["nodes_up"] != wantUp || r.body["quorum"] != float64(2) {
			t.Fatalf("got %d %s, want %d %s with %v nodes up of a quorum of 2", r.status, r.raw, wantStatus, wantState, wantUp)
		}
	}
	check(http.StatusOK, "ok", 3)
	srvs[2].Kill(t)
	check(http.StatusOK, "degraded", 2)
	if r := do(t, c, "POST", ts.URL+"/jobs/reindex/run?seconds=0.1", ""); r.status != http.StatusOK {
		t.Fatalf("job with a node down: got %d %s, want 200", r.status, r.raw)
	}
	srvs[1].Kill(t)
	check(http.StatusServiceUnavailable, "", 0)
}
