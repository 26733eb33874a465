package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAdminSide checks who sees the locks: the public listener serves no
// lock view; on the admin side an anonymous request (when a token is set)
// gets 401 and no keys, the operator gets keys redacted unless
// LOCK_VIEW_KEYS opted in, and Prometheus metrics of the locks taken (in a
// build with the prometheus tag; without it /metrics is 404 naming the tag).
func TestAdminSide(t *testing.T) {
	for _, tc := range []struct {
		name     string
		showKeys bool
	}{{"redacted", false}, {"keys shown", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a server of its own; it waits for a job
			cfg := testConfig(t)
			cfg.AdminToken = operatorToken
			cfg.LockViewKeys = tc.showKeys
			cfg.jobDuration = 2 * time.Second
			url, logs, stop := bootRun(t, cfg)
			defer func() {
				if err := stop(); err != nil {
					t.Error(err)
				}
			}()
			admin := adminURL(t, logs)
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			done := make(chan response, 1)
			// A job the app runs (a name outside jobNames is 404 and takes no
			// lock); its key stands in for one built from client data.
			go func() { done <- doOperator(t, c, "POST", url+"/jobs/reindex/run") }()
			const key = "job:reindex"
			authed := func(path string) response {
				req, _ := http.NewRequest("GET", admin+path, nil)
				req.Header.Set("Authorization", "Bearer "+operatorToken)
				res, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				var b strings.Builder
				buf := make([]byte, 32<<10)
				for {
					n, err := res.Body.Read(buf)
					b.Write(buf[:n])
					if err != nil {
						break
					}
				}
				return response{status: res.StatusCode, raw: b.String()}
			}
			eventually(t, "the job's lock on the admin side", func() bool {
				return strings.Contains(authed("/locks").raw, `"namespace":"job"`)
			})
			for _, path := range []string{"/locks", "/debug/locks?format=json", "/debug/locks", "/metrics"} {
				if r := do(t, c, "GET", admin+path, ""); r.status != http.StatusUnauthorized || strings.Contains(r.raw, key) || strings.Contains(r.raw, "job") {
					t.Errorf("anonymous GET %s: got %d %q, want 401 and nothing of the locks", path, r.status, r.raw)
				}
				if r := do(t, c, "GET", url+path, ""); r.status != http.StatusNotFound || strings.Contains(r.raw, key) {
					t.Errorf("public GET %s: got %d %q, want 404", path, r.status, r.raw)
				}
			}
			for _, path := range []string{"/locks", "/debug/locks?format=json"} {
				r := authed(path)
				if r.status != http.StatusOK || strings.Contains(r.raw, key) != tc.showKeys {
					t.Errorf("operator GET %s: got %d %s; want 200, key shown %v", path, r.status, r.raw, tc.showKeys)
				}
			}
			if r := authed("/debug/locks"); r.status != http.StatusOK || !strings.Contains(r.raw, "<title>padlock: locks</title>") {
				t.Errorf("operator GET /debug/locks: got %d, want the page", r.status)
			}
			if r := <-done; r.status != http.StatusOK {
				t.Errorf("the job: got %d %s, want 200", r.status, r.raw)
			}
			m := authed("/metrics")
			if !metricsBuilt {
				// Without the prometheus tag: 404, saying how to get them.
				if m.status != http.StatusNotFound || !strings.Contains(m.raw, "-tags prometheus") {
					t.Errorf("operator GET /metrics without the prometheus tag: got %d %q, want 404 naming the tag", m.status, m.raw)
				}
				return
			}
			for _, want := range []string{`padlock_acquire_outcomes_total{`, `padlock_namespace="job"`, `padlock_outcome="acquired"`, `padlock_lock_hold_duration_seconds_bucket{`} {
				if !strings.Contains(m.raw, want) {
					t.Errorf("/metrics lacks %s:\n%s", want, m.raw)
				}
			}
			if strings.Contains(m.raw, key) {
				t.Errorf("/metrics carries the key %q", key)
			}
		})
	}
}

// operatorToken is the tests' ADMIN_TOKEN: 32 characters, the shortest
// accepted.
const operatorToken = "operator-token-0123456789abcdefg"

// ADMIN_TOKEN guards the lock view and the deployment's health: a token
// shorter than 32 characters is refused at start, naming the variable and
// how to make a good one.
func TestAdminConfig(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{}, ""},
		{map[string]string{"ADMIN_ADDR": "0.0.0.0:8081"}, "not a loopback address"},
		{map[string]string{"ADMIN_ADDR": "0.0.0.0:8081", "ADMIN_TOKEN": operatorToken}, ""},
		{map[string]string{"ADMIN_ADDR": "0.0.0.0:8081", "ADMIN_TOKEN": "t"}, "ADMIN_TOKEN: the token has 1 characters, want at least 32"},
		{map[string]string{"ADMIN_TOKEN": operatorToken[:31]}, "make one with: openssl rand -hex 32"},
		{map[string]string{"ADMIN_ADDR": "localhost:9"}, ""},
		{map[string]string{"LOCK_VIEW_KEYS": "yes"}, "LOCK_VIEW_KEYS"},
	} {
		_, err := loadConfig(func(k string) string { return tc.env[k] })
		if got := ""; err != nil {
			got = err.Error()
			if tc.wantErr == "" || !strings.Contains(got, tc.wantErr) {
				t.Errorf("%v: got %v, want %q", tc.env, err, tc.wantErr)
			}
		} else if tc.wantErr != "" {
			t.Errorf("%v: got no error, want %q", tc.env, tc.wantErr)
		}
	}
}
