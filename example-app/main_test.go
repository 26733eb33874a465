package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/padlockgo/padlock/internal/redistest"
)

// mainEnv, set to 1, makes the test binary run the app's main instead of
// the tests: startMain runs the app as a process of its own that way.
const mainEnv = "PADLOCK_EXAMPLE_APP_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0)
	}
	gin.SetMode(gin.TestMode)
	goleak.VerifyTestMain(m, redistest.DialProbe)
}

// The API keys of the tests' two callers, and of their operator.
const (
	testKey         = "test-key-shop-1-0123456789"
	testKey2        = "test-key-shop-2-0123456789"
	testOperatorKey = "test-key-ops-0123456789"
)

// testKeys are the tests' callers, shop-1 (the default) and shop-2, and
// ops, the operator (see testConfig).
func testKeys(t testing.TB) apiKeys {
	t.Helper()
	keys, err := parseAPIKeys("shop-1=" + testKey + ",shop-2=" + testKey2 + ",ops=" + testOperatorKey)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// testConfig is the app's configuration for a test: a real Redis server of
// its own (or the harness's miniredis fallback), a database in the test's
// temp dir, and short timings.
func testConfig(t testing.TB) config {
	t.Helper()
	cfg := defaultConfig()
	cfg.RedisAddrs = []string{redistest.Start(t).Addr()}
	cfg.RedisMode = modeSingle
	cfg.DBPath = filepath.Join(t.TempDir(), "orders.db")
	cfg.providerLatency = 20 * time.Millisecond
	cfg.jobDuration = 200 * time.Millisecond
	cfg.APIKeys = testKeys(t)
	cfg.Operators = map[string]bool{"ops": true}
	return cfg
}

// startApp builds the app from cfg and serves it over real HTTP on a
// loopback port; both are closed when t ends.
func startApp(t testing.TB, cfg config) (*app, *httptest.Server) {
	t.Helper()
	return startAppLogged(t, cfg, slog.New(slog.DiscardHandler))
}

// startAppLogged is startApp logging to logger.
func startAppLogged(t testing.TB, cfg config, logger *slog.Logger) (*app, *httptest.Server) {
	t.Helper()
	a, err := newApp(context.Background(), cfg, logger)
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	t.Cleanup(a.close)
	ts := httptest.NewServer(a.server)
	t.Cleanup(ts.Close)
	return a, ts
}

// response is a decoded HTTP answer.
type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// do sends a request with body (as application/json when not empty).
func do(t testing.TB, c *http.Client, method, url, body string) response {
	t.Helper()
	var hdr http.Header
	if body != "" {
		hdr = http.Header{"Content-Type": {"application/json"}}
	}
	return doHeader(t, c, method, url, body, hdr)
}

// doOperator sends a request without a body as the operator, ops: the
// caller that may run jobs.
func doOperator(t testing.TB, c *http.Client, method, url string) response {
	t.Helper()
	return doHeader(t, c, method, url, "", http.Header{"Authorization": {"Bearer " + testOperatorKey}})
}

// doHeader sends a request with body and the header fields hdr, as the
// caller shop-1 unless hdr has an Authorization field (an empty one sends
// none).
func doHeader(t testing.TB, c *http.Client, method, url, body string, hdr http.Header) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	maps.Copy(req.Header, hdr)
	if req.Header.Get("Authorization") == "" {
		req.Header.Del("Authorization")
	}
	res, err := c.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return response{}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := response{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// createOrder makes an order through the API and returns its id.
func createOrder(t testing.TB, ts *httptest.Server) int64 {
	t.Helper()
	r := do(t, ts.Client(), "POST", ts.URL+"/orders", `{"customer":"alice","amount_cents":1299,"currency":"EUR"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create order: got %d %s, want 201", r.status, r.raw)
	}
	return int64(r.body["id"].(float64))
}

// checkProblem fails t unless r is a problem+json answer with status.
func checkProblem(t testing.TB, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got status %d (%s), want %d", r.status, r.raw, status)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("got Content-Type %q, want application/problem+json", ct)
	}
	if got := r.body["status"]; got != float64(status) {
		t.Fatalf("got problem status %v, want %d", got, status)
	}
}

// eventually polls cond until it holds or 20s pass: a bound for a loaded
// machine, not a measure.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
