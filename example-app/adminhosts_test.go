package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlockgo/padlock/lockkey"
)

// keyHash is the key_hash the app shows for key with no LOCK_KEY_SECRET:
// a keyed hash under this process's secret, which the tests share.
func keyHash(key string) string { return (*lockkey.Redactor)(nil).Hash(key) }

// A web page that rebinds attacker.example to the admin listener sends
// "Host: attacker.example": the whole admin side (lock page, /locks,
// /metrics) answers it 421 with no data, and answers localhost, IP
// addresses and ADMIN_HOSTS.
func TestAdminRefusesRebinding(t *testing.T) {
	t.Parallel() // a server of its own; it waits for a job
	cfg := testConfig(t)
	if err := loadAdminConfig(&cfg, mapEnv(map[string]string{"ADMIN_HOSTS": "admin.internal.example"})); err != nil {
		t.Fatal(err)
	}
	cfg.jobDuration = 2 * time.Second
	a, ts := startApp(t, cfg)
	admin := httptest.NewServer(a.admin)
	defer admin.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { doOperator(t, ts.Client(), "POST", ts.URL+"/jobs/reindex/run") })
	eventually(t, "the job's lock in /locks", func() bool {
		return strings.Contains(do(t, ts.Client(), "GET", admin.URL+"/locks", "").raw, `"namespace":"job"`)
	})
	port := admin.URL[strings.LastIndexByte(admin.URL, ':'):]
	for _, path := range []string{"/locks", "/debug/locks?format=json", "/debug/locks", "/metrics"} {
		served := http.StatusOK
		if path == "/metrics" && !metricsBuilt {
			served = http.StatusNotFound // built without the prometheus tag
		}
		for host, want := range map[string]int{
			"attacker.example":               http.StatusMisdirectedRequest,
			"attacker.example" + port:        http.StatusMisdirectedRequest,
			"localhost" + port:               served,
			"127.0.0.1" + port:               served,
			"[::1]" + port:                   served,
			"admin.internal.example" + port:  served,
			"admin.internal.example.evil.io": http.StatusMisdirectedRequest,
		} {
			req, _ := http.NewRequest("GET", admin.URL+path, nil)
			req.Host = host
			res, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("GET %s, Host %s: got %d %q, want %d", path, host, res.StatusCode, body, want)
			}
			if want == http.StatusMisdirectedRequest && (strings.Contains(string(body), "job") || strings.Contains(string(body), "padlock_")) {
				t.Errorf("GET %s, Host %s: got %q, want nothing of the locks", path, host, body)
			}
		}
	}
}

// key_hash on the admin side is keyed with LOCK_KEY_SECRET: a dictionary of
// plain SHA-256 hashes does not reverse it, the same key has the same hash,
// and the namespaces of LOCK_VIEW_NAMESPACES show their keys.
func TestLockKeySecret(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		showKeys bool
	}{
		{"process secret", nil, false},
		{"LOCK_KEY_SECRET", map[string]string{"LOCK_KEY_SECRET": "0123456789abcdef0123"}, false},
		{"LOCK_VIEW_NAMESPACES=job", map[string]string{"LOCK_KEY_SECRET": "0123456789abcdef0123", "LOCK_VIEW_NAMESPACES": "job"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a server of its own; it waits for a job
			cfg := testConfig(t)
			if err := loadAdminConfig(&cfg, mapEnv(tc.env)); err != nil {
				t.Fatal(err)
			}
			cfg.jobDuration = 2 * time.Second
			a, ts := startApp(t, cfg)
			admin := httptest.NewServer(a.admin)
			defer admin.Close()
			var wg sync.WaitGroup
			defer wg.Wait()
			wg.Go(func() { doOperator(t, ts.Client(), "POST", ts.URL+"/jobs/nightly-report/run") })
			var lock map[string]any
			eventually(t, "the job's lock in /locks", func() bool {
				held, _ := do(t, ts.Client(), "GET", admin.URL+"/locks", "").body["locks"].([]any)
				if len(held) == 1 {
					lock = held[0].(map[string]any)
				}
				return lock != nil
			})
			const key = "job:nightly-report"
			plain := sha256.Sum256([]byte(key))
			if lock["key_hash"] == hex.EncodeToString(plain[:6]) {
				t.Errorf("got key_hash %v, the plain SHA-256 of %q: a dictionary reverses it", lock["key_hash"], key)
			}
			if want := cfg.KeyRedactor.Hash(key); lock["key_hash"] != want {
				t.Errorf("got key_hash %v, want %s, the app's keyed hash", lock["key_hash"], want)
			}
			if shown := lock["key"] == key; shown != tc.showKeys {
				t.Errorf("got key %v, want it shown %v", lock["key"], tc.showKeys)
			}
		})
	}
	if (&lockkey.Redactor{}).Hash("order:1") == mustRedactor(t, "0123456789abcdef0123").Hash("order:1") {
		t.Error("got one hash with and without LOCK_KEY_SECRET, want the secret to key it")
	}
}

func TestAdminConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"ADMIN_HOSTS": "admin.example:8081"}, "ADMIN_HOSTS"},
		{map[string]string{"ADMIN_HOSTS": "https://admin.example"}, "ADMIN_HOSTS"},
		{map[string]string{"LOCK_KEY_SECRET": "too-short"}, "LOCK_KEY_SECRET: 9 bytes"},
		{map[string]string{"LOCK_VIEW_NAMESPACES": "a:b"}, "LOCK_VIEW_NAMESPACES"},
	} {
		cfg := defaultConfig()
		err := loadAdminConfig(&cfg, mapEnv(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "too-short") {
			t.Errorf("%v: got %v, want an error naming %s (and not the secret)", tc.env, err, tc.want)
		}
	}
}

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func mustRedactor(t *testing.T, secret string) *lockkey.Redactor {
	t.Helper()
	r, err := lockkey.NewRedactor(lockkey.WithRedactSecret([]byte(secret)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
