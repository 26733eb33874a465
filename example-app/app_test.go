package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
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
