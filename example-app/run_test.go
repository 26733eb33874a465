package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

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
	// A fresh node votes after this long. Short, so the nodes vote soon,
	// but 6 s rather than 1: the job's lock is renewed each third of it
	// across the node timeout below, and with 1 s a loaded machine
	// stalling the renewals for half a second lost the lock (the job's
	// 409). Nothing here depends on the lease's length.
	cfg.lockTTL = 6 * time.Second
	// And a node timeout a loaded machine meets: beside two more test
	// runs all three nodes once missed the app's 500 ms at once, and the
	// job rightly answered 503 (0 of 3 agreed), which says nothing of
	// the app. The lease leaves the renewals room for it.
	cfg.nodeTimeout = 2 * time.Second
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
