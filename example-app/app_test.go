package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

func TestCreateOrderValidation(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	tests := []struct {
		name      string
		body      string
		status    int
		wantField string // a field named in the problem's errors
		wantRule  string
	}{
		{"valid", `{"customer":"alice","amount_cents":1299,"currency":"EUR"}`, http.StatusCreated, "", ""},
		{"missing customer", `{"amount_cents":1299,"currency":"EUR"}`, http.StatusBadRequest, "customer", "required"},
		{"negative amount", `{"customer":"a","amount_cents":-5,"currency":"EUR"}`, http.StatusBadRequest, "amount_cents", "gt"},
		{"zero amount", `{"customer":"a","amount_cents":0,"currency":"EUR"}`, http.StatusBadRequest, "amount_cents", "gt"},
		{"missing amount", `{"customer":"a","currency":"EUR"}`, http.StatusBadRequest, "amount_cents", "required"},
		{"unknown currency", `{"customer":"a","amount_cents":1,"currency":"EURO"}`, http.StatusBadRequest, "currency", "iso4217"},
		{"malformed JSON", `{"customer":`, http.StatusBadRequest, "", ""},
		{"body too large", `{"customer":"` + strings.Repeat("a", maxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, ts.Client(), "POST", ts.URL+"/orders", tt.body)
			if tt.status == http.StatusCreated {
				if r.status != tt.status || r.header.Get("Location") != fmt.Sprintf("/orders/%v", r.body["id"]) || r.body["status"] != "pending" {
					t.Fatalf("got %d %s (Location %q), want 201 with a pending order", r.status, r.raw, r.header.Get("Location"))
				}
				return
			}
			checkProblem(t, r, tt.status)
			if tt.wantField == "" {
				return
			}
			for _, e := range r.body["errors"].([]any) {
				if e := e.(map[string]any); e["field"] == tt.wantField && e["rule"] == tt.wantRule {
					return
				}
			}
			t.Fatalf("got errors %v, want field %s breaking %s", r.body["errors"], tt.wantField, tt.wantRule)
		})
	}
}

func TestRoutesMisc(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	tests := []struct {
		method, path string
		status       int
		contains     string
	}{
		{"GET", "/", http.StatusOK, `"routes"`},
		{"GET", "/healthz", http.StatusOK, `"status":"ok"`},
		{"GET", "/locks", http.StatusNotFound, "no such route"}, // the admin side's, not here
		{"GET", "/debug/locks", http.StatusNotFound, "no such route"},
		{"GET", "/metrics", http.StatusNotFound, "no such route"},
		{"GET", "/nope", http.StatusNotFound, "no such route"},
		{"DELETE", "/orders", http.StatusMethodNotAllowed, "method not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := do(t, ts.Client(), tt.method, ts.URL+tt.path, "")
			if r.status != tt.status || !strings.Contains(r.raw, tt.contains) {
				t.Fatalf("got %d %s, want %d containing %s", r.status, r.raw, tt.status, tt.contains)
			}
		})
	}
}

// The index tells a caller without an API key which routes it may call:
// each of them answers here without one.
func TestIndexOpenRoutes(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	idx := do(t, ts.Client(), "GET", ts.URL+"/", "")
	auth, _ := idx.body["auth"].(string)
	open := regexp.MustCompile(`/[a-z/]*`).FindAllString(strings.SplitN(auth, "needs", 2)[0], -1)
	if len(open) == 0 {
		t.Fatalf("got auth %q, want the routes open without an API key named", auth)
	}
	for _, path := range open {
		r := doHeader(t, ts.Client(), "GET", ts.URL+path, "", http.Header{"Authorization": {""}})
		if r.status != http.StatusOK {
			t.Errorf("GET %s without an API key: got %d %s, want 200 (the index names it open)", path, r.status, r.raw)
		}
	}
}

// Two runs of one job at once: the second gets 409 with Retry-After while
// the first holds the lock, which the lock view lists; the first finishes
// with its fence, through four reentrant checkpoints.
func TestJobs(t *testing.T) {
	cfg := testConfig(t)
	cfg.jobDuration = time.Second
	a, ts := startApp(t, cfg)
	admin := httptest.NewServer(a.admin)
	defer admin.Close()
	c := ts.Client()

	var first response
	var wg sync.WaitGroup
	wg.Go(func() { first = doOperator(t, c, "POST", ts.URL+"/jobs/nightly-report/run") })
	var held []any
	eventually(t, "the job's lock in /locks", func() bool {
		held, _ = do(t, c, "GET", admin.URL+"/locks", "").body["locks"].([]any)
		return len(held) == 1
	})
	// Redacted: the namespace and a hash of the key, not the key.
	lock := held[0].(map[string]any)
	if lock["key"] != nil || lock["namespace"] != "job" || lock["key_hash"] != keyHash("job:nightly-report") ||
		lock["ttl_ms"].(float64) <= 0 || lock["owner"] != processOwner()+" func=jobs.run" {
		t.Fatalf("got lock view entry %v, want job:nightly-report's namespace and hash, a lease and an owner naming the job's function", lock)
	}

	second := doOperator(t, c, "POST", ts.URL+"/jobs/nightly-report/run")
	checkProblem(t, second, http.StatusConflict)
	if second.header.Get("Retry-After") == "" || second.body["key"] != "job:nightly-report" {
		t.Fatalf("got %v, Retry-After %q; want the key and Retry-After", second.body, second.header.Get("Retry-After"))
	}
	wg.Wait()
	if first.status != http.StatusOK || first.body["fence"].(float64) <= 0 || first.body["steps"] != float64(jobSteps) {
		t.Fatalf("first run: got %d %s, want 200 with a fence and %d steps", first.status, first.raw, jobSteps)
	}
	// Free again: another run goes through.
	if r := doOperator(t, c, "POST", ts.URL+"/jobs/nightly-report/run?seconds=0.05"); r.status != http.StatusOK {
		t.Fatalf("third run: got %d %s, want 200", r.status, r.raw)
	}
	// A run is capped, and the jobs are the app's own: no caller holds a
	// lock for longer, or on more names.
	r := doOperator(t, c, "POST", ts.URL+"/jobs/nightly-report/run?seconds=31")
	checkProblem(t, r, http.StatusBadRequest)
	checkFieldError(t, r, "seconds", "lte")
	for _, name := range []string{"x", "nightly-report-2", strings.Repeat("a", 65), "%00"} {
		checkProblem(t, doOperator(t, c, "POST", ts.URL+"/jobs/"+name+"/run?seconds=0.01"), http.StatusNotFound)
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    func(config) bool
		wantErr string
	}{
		{"defaults", nil, func(c config) bool {
			return c.Addr == "127.0.0.1:8080" && c.RedisMode == modeEmbedded && c.DBPath == "" && c.LogFormat == "text"
		}, ""},
		{"one address", map[string]string{"REDIS_ADDR": "localhost:6379"}, func(c config) bool { return c.RedisMode == modeSingle }, ""},
		{"a list is redlock", map[string]string{"REDIS_ADDR": "a:1, b:2,c:3"}, func(c config) bool {
			return c.RedisMode == modeRedlock && len(c.RedisAddrs) == 3 && c.RedisAddrs[1] == "b:2"
		}, ""},
		{"cluster", map[string]string{"REDIS_ADDR": "a:1,b:2", "REDIS_MODE": "cluster"}, func(c config) bool { return c.RedisMode == modeCluster }, ""},
		{"everything", map[string]string{"ADDR": ":9090", "DB_PATH": "/tmp/x.db", "LOG_FORMAT": "json"}, func(c config) bool {
			return c.Addr == ":9090" && c.DBPath == "/tmp/x.db" && c.LogFormat == "json"
		}, ""},
		{"bad mode", map[string]string{"REDIS_ADDR": "a:1", "REDIS_MODE": "sentinel"}, nil, `REDIS_MODE: "sentinel", want single, cluster or redlock`},
		{"mode without address", map[string]string{"REDIS_MODE": "cluster"}, nil, `REDIS_MODE: "cluster" needs REDIS_ADDR`},
		{"single with a list", map[string]string{"REDIS_ADDR": "a:1,b:2", "REDIS_MODE": "single"}, nil, "REDIS_MODE: single takes one address, REDIS_ADDR has 2"},
		{"bad address", map[string]string{"REDIS_ADDR": "localhost"}, nil, `REDIS_ADDR: "localhost" is not host:port`},
		{"bad ADDR", map[string]string{"ADDR": "8080"}, nil, `ADDR: "8080" is not host:port`},
		{"bad log format", map[string]string{"LOG_FORMAT": "xml"}, nil, `LOG_FORMAT: "xml", want text or json`},
		{"api keys", map[string]string{"API_KEYS": "shop-1=0123456789abcdef, shop-2=fedcba9876543210"}, func(c config) bool {
			return len(c.APIKeys) == 2 && c.DemoKeys == nil && c.APIKeys[sha256.Sum256([]byte("fedcba9876543210"))] == "shop-2"
		}, ""},
		{"demo keys", nil, func(c config) bool {
			return len(c.APIKeys) == 3 && len(c.DemoKeys) == 3 && c.APIKeys[sha256.Sum256([]byte(c.DemoKeys["demo-bob"]))] == "demo-bob" &&
				len(c.Operators) == 1 && c.Operators[demoOperator]
		}, ""},
		{"operators", map[string]string{"API_KEYS": "shop-1=0123456789abcdef,ops=fedcba9876543210", "OPERATORS": " ops "}, func(c config) bool {
			return len(c.Operators) == 1 && c.Operators["ops"]
		}, ""},
		{"no operators by default", map[string]string{"API_KEYS": "shop-1=0123456789abcdef"}, func(c config) bool { return len(c.Operators) == 0 }, ""},
		{"unknown operator", map[string]string{"API_KEYS": "shop-1=0123456789abcdef", "OPERATORS": "root"}, nil, `OPERATORS: "root" is not a caller of API_KEYS`},
		{"operators without keys", map[string]string{"OPERATORS": "demo-operator"}, nil, "OPERATORS names callers of API_KEYS, which is not set"},
		{"redlock knobs", map[string]string{"REDIS_ADDR": "a:1,b:2,c:3", "REDIS_NODE_TIMEOUT": "250ms", "REDIS_PERSISTENT_NODES": "1"}, func(c config) bool {
			return c.nodeTimeout == 250*time.Millisecond && c.persistentNodes
		}, ""},
		{"redlock defaults", map[string]string{"REDIS_ADDR": "a:1,b:2,c:3"}, func(c config) bool {
			return c.nodeTimeout == 500*time.Millisecond && !c.persistentNodes
		}, ""},
		{"node timeout not below the lease", map[string]string{"REDIS_ADDR": "a:1,b:2,c:3", "REDIS_NODE_TIMEOUT": "10s"}, nil, `REDIS_NODE_TIMEOUT: "10s", want a duration above 0 and below the lock lease 10s`},
		{"persistent nodes: bad value", map[string]string{"REDIS_ADDR": "a:1,b:2,c:3", "REDIS_PERSISTENT_NODES": "yes"}, nil, `REDIS_PERSISTENT_NODES: "yes", want 1 or 0`},
		{"redlock knobs off redlock", map[string]string{"REDIS_ADDR": "a:1", "REDIS_PERSISTENT_NODES": "1"}, nil, "REDIS_NODE_TIMEOUT and REDIS_PERSISTENT_NODES apply to REDIS_MODE=redlock only"},
		{"trusted proxies", map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.1"}, func(c config) bool {
			return len(c.trustedProxies) == 2 && c.trustedProxies[1] == "192.0.2.1"
		}, ""},
		{"no trusted proxies by default", nil, func(c config) bool { return c.trustedProxies == nil }, ""},
		{"bad trusted proxy", map[string]string{"TRUSTED_PROXIES": "proxy.local"}, nil, `TRUSTED_PROXIES: "proxy.local" is neither an IP nor a CIDR`},
		{"shutdown grace", map[string]string{"SHUTDOWN_GRACE": "1m30s"}, func(c config) bool { return c.shutdownTimeout == 90*time.Second }, ""},
		{"bad shutdown grace", map[string]string{"SHUTDOWN_GRACE": "10"}, nil, `SHUTDOWN_GRACE: "10", want a duration`},
		{"short api key", map[string]string{"API_KEYS": "shop-1=short"}, nil, `API_KEYS: caller "shop-1": the key has 5 characters, want at least 16`},
		{"api key without caller", map[string]string{"API_KEYS": "0123456789abcdef"}, nil, `API_KEYS: "0123456789abcdef" is not caller=key`},
		{"bad caller", map[string]string{"API_KEYS": "a b=0123456789abcdef"}, nil, `API_KEYS: caller "a b": want`},
		{"shared api key", map[string]string{"API_KEYS": "a=0123456789abcdef,b=0123456789abcdef"}, nil, `API_KEYS: caller "b": the key is another caller's too`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.want(cfg) {
				t.Fatalf("got %+v, %v", cfg, err)
			}
		})
	}
}

// syncBuffer is a log sink that run writes to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bootRun runs the app as main does, with cfg, until the returned stop is
// called; it returns the address it listens on and its JSON log.
func bootRun(t *testing.T, cfg config) (url string, logs *syncBuffer, stop func() error) {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	cfg.AdminAddr = "127.0.0.1:0"
	logs = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil))) }()
	stop = func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			t.Fatal("run did not return after its context was cancelled")
			return nil
		}
	}
	eventually(t, "the listening log line", func() bool {
		for line := range strings.SplitSeq(logs.String(), "\n") {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				url = "http://" + rec.Addr
				return true
			}
		}
		select {
		case err := <-done:
			t.Fatalf("run returned %v before listening; log:\n%s", err, logs)
		default:
		}
		return false
	})
	return url, logs, stop
}

// adminURL returns the admin listener's URL from a bootRun's log.
func adminURL(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	url := ""
	eventually(t, "the admin listening log line", func() bool {
		for line := range strings.SplitSeq(logs.String(), "\n") {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "admin listening" {
				url = "http://" + rec.Addr
				return true
			}
		}
		return false
	})
	return url
}

// With no configuration the app starts an embedded miniredis and a temp
// database, says so, serves, and shuts down cleanly, removing the database.
func TestRunEmbedded(t *testing.T) {
	cfg, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.providerLatency = time.Millisecond
	if len(cfg.DemoKeys) != 3 {
		t.Fatalf("got demo keys %v, want three without API_KEYS", cfg.DemoKeys)
	}
	cfg.APIKeys, cfg.Operators = testKeys(t), map[string]bool{"ops": true}
	url, logs, stop := bootRun(t, cfg)
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	if r := do(t, c, "GET", url+"/healthz", ""); r.status != http.StatusOK || r.raw != `{"status":"ok"}` {
		t.Fatalf("healthz: got %d %s, want 200 ok", r.status, r.raw)
	}
	if r := do(t, c, "GET", adminURL(t, logs)+"/healthz", ""); r.status != http.StatusOK || r.body["redis"] != "embedded miniredis" {
		t.Fatalf("admin healthz: got %d %s, want 200 on embedded miniredis", r.status, r.raw)
	}
	r := do(t, c, "POST", url+"/orders", `{"customer":"bob","amount_cents":500,"currency":"USD"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: got %d %s", r.status, r.raw)
	}
	pay := fmt.Sprintf("%s/orders/%v/pay", url, r.body["id"])
	if r := do(t, c, "POST", pay, ""); r.status != http.StatusOK || r.body["charge"] == nil || r.body["fence"].(float64) <= 0 {
		t.Fatalf("pay: got %d %s, want 200 with a charge and a fence", r.status, r.raw)
	}
	if r := do(t, c, "POST", pay, ""); r.status != http.StatusOK || r.body["already_paid"] != true {
		t.Fatalf("pay again: got %d %s, want already_paid", r.status, r.raw)
	}
	c.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Fatalf("run: got %v, want nil after a clean shutdown", err)
	}
	out := logs.String()
	for _, want := range []string{`"mode":"embedded miniredis"`, `"msg":"shutting down:`, `"msg":"stopped"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %s:\n%s", want, out)
		}
	}
	var path string
	for line := range strings.SplitSeq(out, "\n") {
		var rec struct{ Msg, Path string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "database: sqlite" {
			path = rec.Path
		}
	}
	if _, err := os.Stat(path); path == "" || !os.IsNotExist(err) {
		t.Fatalf("temp database %q: got %v, want it removed at exit", path, err)
	}
}

// Shutdown waits for a request in flight: a job started before the signal
// finishes and answers 200.
func TestRunGraceful(t *testing.T) {
	cfg := testConfig(t)
	cfg.jobDuration = 500 * time.Millisecond
	url, logs, stop := bootRun(t, cfg)
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()

	var r response
	var wg sync.WaitGroup
	wg.Go(func() { r = doOperator(t, c, "POST", url+"/jobs/reindex/run") })
	eventually(t, "the job to start", func() bool { return strings.Contains(logs.String(), `"msg":"job started"`) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if r.status != http.StatusOK || r.body["steps"] != float64(jobSteps) {
		t.Fatalf("job in flight at shutdown: got %d %s, want 200 with every step done", r.status, r.raw)
	}
}

// Redlock over three independent servers: locking works (once the nodes
// have been up for the lock TTL), the lock view counts the nodes holding a
// lock, fences are 0, and a payment still charges once.
func TestRunRedlock(t *testing.T) {
	t.Parallel() // servers of its own, which it waits on
	redistest.Require(t)
	cfg := testConfig(t)
	cfg.lockTTL = time.Second // a fresh node votes after this long
	// Fresh nodes, not the binary's spares: nodes that vote at once let
	// the app's own scheduled reindex take the job's lock as it starts.
	srvs := redistest.StartN(t, 3)
	cfg.RedisAddrs = []string{srvs[0].Addr(), srvs[1].Addr(), srvs[2].Addr()}
	cfg.RedisMode = modeRedlock
	// Long enough for the lock view to see the job's lock while it runs,
	// polled by a test that may get little CPU.
	cfg.jobDuration = 2 * time.Second
	url, logs, stop := bootRun(t, cfg)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	if !strings.Contains(logs.String(), "redlock gives no fencing tokens") {
		t.Fatalf("log lacks the no-fencing warning:\n%s", logs)
	}
	// A node votes once it has surely been up for the lock TTL. Redis
	// reports uptime in whole seconds, counted from a start rounded down,
	// and padlock trusts it a second less than it says: the first reading
	// that surely counts comes two seconds after the TTL. /healthz takes a
	// probe lock, so it turns 200 when a majority votes; polled rather than
	// slept for, that holds on a loaded machine too.
	waitHealthy(t, c, url, cfg.lockTTL+20*time.Second)

	r := do(t, c, "POST", url+"/orders", `{"customer":"carol","amount_cents":700,"currency":"GBP"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: got %d %s", r.status, r.raw)
	}
	pay := fmt.Sprintf("%s/orders/%v/pay", url, r.body["id"])
	var wg sync.WaitGroup
	results := make([]response, 20)
	for i := range results {
		wg.Go(func() { results[i] = do(t, c, "POST", pay, "") })
	}
	var view response
	wg.Go(func() {
		r := doOperator(t, c, "POST", url+"/jobs/reindex/run")
		if r.status != http.StatusOK {
			t.Errorf("job: got %d %s", r.status, r.raw)
		}
	})
	// The lock is taken once a majority grants it; the third node's grant
	// may land a moment later.
	eventually(t, "the job's lock on 3 nodes in the lock view", func() bool {
		view = do(t, c, "GET", adminURL(t, logs)+"/locks", "")
		locks, _ := view.body["locks"].([]any)
		for _, l := range locks {
			if l := l.(map[string]any); l["key_hash"] == keyHash("job:reindex") && l["nodes"] == float64(3) {
				return true
			}
		}
		return false
	})
	wg.Wait()
	charged := 0
	for _, r := range results {
		switch {
		case r.status == http.StatusOK && r.body["charge"] != nil:
			charged++
			if r.body["fence"] != float64(0) {
				t.Fatalf("got fence %v on Redlock, want 0", r.body["fence"])
			}
		case r.status == http.StatusOK && r.body["already_paid"] == true, r.status == http.StatusConflict:
		default:
			t.Fatalf("got %d %s, want 200 or 409", r.status, r.raw)
		}
	}
	if charged != 1 {
		t.Fatalf("got %d charges, want 1", charged)
	}
}

// waitHealthy polls url's /healthz until it answers 200, for up to d.
func waitHealthy(t *testing.T, c *http.Client, url string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := do(t, c, "GET", url+"/healthz", "")
		if r.status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz: got %d %s for %v, want 200", r.status, r.raw, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The embedded Redis wakes waiters with release notices: padlock publishes
// them from its Lua scripts, which miniredis delivers to subscribers, so a
// waiting pay request does not poll. A waiter subscribes to the lock's
// channel and gets the lock right after the release.
func TestEmbeddedRedisNotices(t *testing.T) {
	e, err := startEmbeddedRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	rdb := redis.NewClient(e.options())
	defer rdb.Close()
	l, err := padlock.New(rdb, padlock.WithDefaults(padlock.Options{
		// A retry pace far slower than a notice: a waiter that polled would
		// take seconds.
		Retry: padlock.LinearBackoff(5 * time.Second),
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()

	held, err := l.Acquire(ctx, "k", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		lk, err := l.Acquire(ctx, "k", padlock.Options{Wait: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- time.Now()
		_ = lk.Release(ctx)
	})
	eventually(t, "the waiter to subscribe", func() bool {
		return e.m.PubSubNumSub("padlock:{k}")["padlock:{k}"] == 1
	})
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// Without the notice the waiter would sleep until its 1s re-check.
	if d := (<-got).Sub(released); d > 700*time.Millisecond {
		t.Fatalf("waiter got the lock %v after the release, want it at once (woken by the notice)", d)
	}
}

// A Redis Cluster of three masters: the app pays once with fences, and the
// lock view scans every master.
func TestRunCluster(t *testing.T) {
	t.Parallel() // servers of its own, which it waits on
	cluster := redistest.StartCluster(t, 3)
	cfg := testConfig(t)
	cfg.RedisAddrs = cluster.Addrs()
	cfg.RedisMode = modeCluster
	cfg.jobDuration = 2 * time.Second
	url, logs, stop := bootRun(t, cfg)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	if !strings.Contains(logs.String(), `"mode":"cluster"`) {
		t.Fatalf("log lacks the cluster mode:\n%s", logs)
	}

	r := do(t, c, "POST", url+"/orders", `{"customer":"dan","amount_cents":900,"currency":"JPY"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: got %d %s", r.status, r.raw)
	}
	pay := fmt.Sprintf("%s/orders/%v/pay", url, r.body["id"])
	results := make([]response, 20)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = do(t, c, "POST", pay, "") })
	}
	// Jobs whose keys land on different masters, all in the view at once.
	names := jobNames[:6]
	for _, n := range names {
		wg.Go(func() {
			if r := doOperator(t, c, "POST", url+"/jobs/"+n+"/run"); r.status != http.StatusOK {
				t.Errorf("job %s: got %d %s", n, r.status, r.raw)
			}
		})
	}
	eventually(t, "every job in the lock view", func() bool {
		view := do(t, c, "GET", adminURL(t, logs)+"/locks", "")
		for _, n := range names {
			if !strings.Contains(view.raw, `"key_hash":"`+keyHash("job:"+n)+`"`) {
				return false
			}
		}
		return true
	})
	wg.Wait()
	charged := 0
	for _, r := range results {
		switch {
		case r.status == http.StatusOK && r.body["charge"] != nil:
			charged++
		case r.status == http.StatusOK && r.body["already_paid"] == true, r.status == http.StatusConflict:
		default:
			t.Fatalf("got %d %s, want 200 or 409", r.status, r.raw)
		}
	}
	if charged != 1 {
		t.Fatalf("got %d charges, want 1", charged)
	}
}

// The example app's guide has a configuration table naming every variable
// the app reads (the usage text lists them), and the guide on deploying
// securely is there for SECURITY.md to point at.
func TestDocsDescribeTheApp(t *testing.T) {
	guide, err := os.ReadFile("../docs/example-app.md")
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := os.ReadFile("../docs/security-deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, m := range regexp.MustCompile(`(?m)^  ([A-Z][A-Z_]+)\s`).FindAllStringSubmatch(usage, -1) {
		vars = append(vars, m[1])
	}
	if len(vars) != 17 {
		t.Fatalf("got variables %v from the usage text, want every one", vars)
	}
	for _, v := range vars {
		if !strings.Contains(string(guide), "| `"+v+"`") {
			t.Errorf("docs/example-app.md's configuration table lacks %s", v)
		}
	}
	if want := `"title":"Content Too Large"`; !strings.Contains(string(guide), want) {
		t.Errorf("docs/example-app.md lacks %q", want)
	}
	for _, want := range []string{"# Deploying securely", "maxmemory-policy noeviction", "SetTrustedProxies", "WriteTimeout"} {
		if !strings.Contains(string(deploy), want) {
			t.Errorf("docs/security-deployment.md lacks %q", want)
		}
	}
	sec, err := os.ReadFile("../SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sec), "(docs/security-deployment.md)") {
		t.Error("SECURITY.md does not point at docs/security-deployment.md")
	}
}
