package idempotency_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
)

// newLocker returns a Locker on a fresh Redis server, closed when t ends.
func newLocker(t testing.TB) (*padlock.Locker, *redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := padlock.New(rdb)
	t.Cleanup(func() { _ = l.Close() })
	return l, srv, rdb
}

// send serves one request with the Idempotency-Key key (none when empty),
// a JSON body, and the given extra header fields, name then value.
func send(h http.Handler, method, target, body, key string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// checkReplay checks that w is a replay of first.
func checkReplay(t testing.TB, w, first *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code != first.Code || w.Body.String() != first.Body.String() {
		t.Fatalf("got %d %s, want the replay of %d %s", w.Code, w.Body, first.Code, first.Body)
	}
	if got := w.Header().Get("Idempotent-Replayed"); got != "true" {
		t.Fatalf("got Idempotent-Replayed %q, want true", got)
	}
}

// tester is the caller of tests that have one caller.
func tester(*http.Request) (string, error) { return "tester", nil }

// problem is the decoded body of a problem response.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
}

// checkProblem checks that w is a problem response with status and returns
// its body.
func checkProblem(t testing.TB, w *httptest.ResponseRecorder, status int) problem {
	t.Helper()
	if w.Code != status {
		t.Fatalf("got status %d (body %s), want %d", w.Code, w.Body, status)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("got Content-Type %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("got body %q: %v", w.Body, err)
	}
	if p.Status != status || p.Title != http.StatusText(status) {
		t.Fatalf("got problem %+v, want status %d, title %q", p, status, http.StatusText(status))
	}
	return p
}
