package lockview_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/lockview"
)

// A page in an operator's browser that rebinds attacker.example to the
// admin listener's address sends its requests with "Host:
// attacker.example". On a real listener: AdminHosts answers those 421 with
// a body saying why, and passes loopback names, IP literals (v4 and v6, with
// and without port) and the names configured; AdminListener alone refuses
// the foreign Host too.
func TestAdminHostsRefuseRebinding(t *testing.T) {
	l, _, _ := setup(t)
	lk, err := l.Acquire(t.Context(), "order:1", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(t.Context())
	view, err := lockview.New(l, lockview.Config{Authorize: lockview.AdminListener})
	if err != nil {
		t.Fatal(err)
	}
	admin := http.NewServeMux()
	admin.Handle("GET /debug/locks", view)
	admin.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "padlock_locks_held 1\n") })
	wrapped := httptest.NewServer(lockview.AdminHosts("admin.internal.example")(admin))
	defer wrapped.Close()
	bare := httptest.NewServer(admin) // AdminListener without AdminHosts
	defer bare.Close()

	send := func(srv *httptest.Server, path, host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	port := wrapped.Listener.Addr().String()[strings.LastIndexByte(wrapped.Listener.Addr().String(), ':'):]
	for _, tc := range []struct {
		host string
		want int
	}{
		{"attacker.example", http.StatusMisdirectedRequest},
		{"attacker.example" + port, http.StatusMisdirectedRequest},
		{"localhost.attacker.example", http.StatusMisdirectedRequest},
		{"127.0.0.1.attacker.example" + port, http.StatusMisdirectedRequest},
		{"admin.internal.example.attacker.example", http.StatusMisdirectedRequest},
		{"localhost" + port, http.StatusOK},
		{"LOCALHOST", http.StatusOK},
		{"ops.localhost" + port, http.StatusOK},
		{"127.0.0.1" + port, http.StatusOK},
		{"10.1.2.3", http.StatusOK},
		{"[::1]" + port, http.StatusOK},
		{"[fd00::5]", http.StatusOK},
		{"admin.internal.example" + port, http.StatusOK},
		{"Admin.Internal.Example.", http.StatusOK},
	} {
		for _, path := range []string{"/debug/locks", "/metrics"} {
			code, body := send(wrapped, path, tc.host)
			if code != tc.want {
				t.Errorf("GET %s, Host %s: got %d (body %q), want %d", path, tc.host, code, body, tc.want)
			}
			if code == http.StatusMisdirectedRequest && !strings.Contains(body, "DNS rebinding") {
				t.Errorf("GET %s, Host %s: got body %q, want it to say why", path, tc.host, body)
			}
			if code != http.StatusOK && (strings.Contains(body, "order") || strings.Contains(body, "padlock_locks_held")) {
				t.Errorf("GET %s, Host %s: got %q, want no data", path, tc.host, body)
			}
		}
	}
	// AdminListener alone knows no configured names: loopback and IP
	// literals only.
	for host, want := range map[string]int{"attacker.example" + port: http.StatusUnauthorized, "localhost" + port: http.StatusOK,
		"127.0.0.1" + port: http.StatusOK, "admin.internal.example": http.StatusUnauthorized} {
		if code, body := send(bare, "/debug/locks", host); code != want || (code != http.StatusOK && strings.Contains(body, "order")) {
			t.Errorf("AdminListener alone, Host %s: got %d (body %q), want %d", host, code, body, want)
		}
	}
}

func TestAdminHostsInvalidName(t *testing.T) {
	for _, n := range []string{"", "admin.example:8081", "http://admin.example", "admin example", "admin/x"} {
		func() {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(v.(string), "lockview: AdminHosts") {
					t.Errorf("AdminHosts(%q): got panic %v, want one naming AdminHosts", n, v)
				}
			}()
			lockview.AdminHosts(n)
		}()
		if err := lockview.CheckAdminHost(n); err == nil {
			t.Errorf("CheckAdminHost(%q): got nil, want an error", n)
		}
	}
}
