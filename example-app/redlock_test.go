package main

import (
	"net/http"
	"net/http/httptest"
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
			s.PersistEveryWrite(t)
		}
	}
	cfg.RedisMode = modeRedlock
	cfg.persistentNodes = persistent
	return cfg, srvs
}

// Freshly started nodes do not vote until they have been up for the max
// lease (the app's lease): until then, a client's 503 and the log say
// so, and when locking can start (Retry-After), instead of "unavailable";
// the admin side's /healthz says the same, the public one only down and
// Retry-After.
func TestRedlockFreshNodesSayWhy(t *testing.T) {
	t.Parallel() // servers of its own
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
	for _, req := range []struct{ method, path, key string }{{"POST", "/jobs/nightly-report/run", testOperatorKey}, {"POST", "/orders/1/pay", testKey}} {
		r := doHeader(t, c, req.method, url+req.path, "", http.Header{"Authorization": {"Bearer " + req.key}})
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
	// The public /healthz says down, and when to ask again; the admin
	// side's says why.
	r := do(t, c, "GET", url+"/healthz", "")
	checkProblem(t, r, http.StatusServiceUnavailable)
	if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); strings.Contains(r.raw, why) || ra < 1 || ra > 63 {
		t.Fatalf("public /healthz: got %s (Retry-After %q), want down, without the details, and Retry-After within the lease", r.raw, r.header.Get("Retry-After"))
	}
	r = do(t, c, "GET", adminURL(t, logs)+"/healthz", "")
	if d, _ := r.body["why"].(string); r.status != http.StatusServiceUnavailable || r.body["status"] != "down" || !strings.Contains(d, why) {
		t.Fatalf("admin /healthz: got %d %s, want 503, down, and why: nodes %s", r.status, r.raw, why)
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
	if r := doOperator(t, ts.Client(), "POST", ts.URL+"/jobs/nightly-report/run?seconds=0.1"); r.status != http.StatusOK {
		t.Fatalf("job on fresh persistent nodes: got %d %s, want 200", r.status, r.raw)
	}
}

// /healthz on Redlock: every node up is ok; a minority down is degraded
// but working (200, locks are taken); a majority down is 503. The public
// answer is that word and its status code, nothing more: no node
// addresses, no dial errors, no counts. The admin side's /healthz has the
// details: every node by address, the down ones with their error.
func TestHealthzRedlockDegraded(t *testing.T) {
	t.Parallel() // servers of its own, which it waits on
	cfg, srvs := redlockConfig(t, true)
	// A node killed refuses at once; one up answers within this even on a
	// loaded machine (the default 500 ms is not: a live node read as down).
	cfg.nodeTimeout = 2 * time.Second
	a, ts := startApp(t, cfg)
	admin := httptest.NewServer(a.admin)
	defer admin.Close()
	c := ts.Client()
	check := func(wantStatus int, wantState string, wantUp float64) {
		t.Helper()
		r := do(t, c, "GET", ts.URL+"/healthz", "")
		if wantStatus != http.StatusOK {
			checkProblem(t, r, wantStatus)
			if d, _ := r.body["detail"].(string); !strings.HasPrefix(d, "down") {
				t.Fatalf("got detail %q, want it to say down", d)
			}
		} else if r.status != wantStatus || len(r.body) != 1 || r.body["status"] != wantState {
			t.Fatalf("got %d %s, want %d and only {\"status\":%q}", r.status, r.raw, wantStatus, wantState)
		}
		for _, leak := range append([]string{"127.0.0.1", "refused", "dial", "node"}, cfg.RedisAddrs...) {
			if strings.Contains(r.raw, leak) {
				t.Fatalf("public /healthz: got %s, want nothing of the nodes (%q)", r.raw, leak)
			}
		}
		ad := do(t, c, "GET", admin.URL+"/healthz", "")
		if ad.status != wantStatus || ad.body["status"] != map[bool]string{true: wantState, false: "down"}[wantStatus == http.StatusOK] ||
			ad.body["nodes_up"] != wantUp || ad.body["quorum"] != float64(2) {
			t.Fatalf("admin /healthz: got %d %s, want %d with %v nodes up of a quorum of 2", ad.status, ad.raw, wantStatus, wantUp)
		}
		nodes, _ := ad.body["nodes"].([]any)
		for i, n := range nodes {
			n := n.(map[string]any)
			_, hasErr := n["error"]
			if n["addr"] != cfg.RedisAddrs[i] || n["up"] != (i < int(wantUp)) || hasErr == (i < int(wantUp)) {
				t.Fatalf("admin /healthz: got node %d %v, want %s, up %v, with an error if down", i, n, cfg.RedisAddrs[i], i < int(wantUp))
			}
		}
		if len(nodes) != 3 {
			t.Fatalf("admin /healthz: got nodes %v, want all 3", ad.body["nodes"])
		}
	}
	check(http.StatusOK, "ok", 3)
	srvs[2].Kill(t)
	check(http.StatusOK, "degraded", 2)
	if r := doOperator(t, c, "POST", ts.URL+"/jobs/reindex/run?seconds=0.1"); r.status != http.StatusOK {
		t.Fatalf("job with a node down: got %d %s, want 200", r.status, r.raw)
	}
	srvs[1].Kill(t)
	check(http.StatusServiceUnavailable, "", 1)
}
