package ginidem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
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

// tester is the caller of tests that have one caller.
func tester(*gin.Context) (string, error) { return "tester", nil }

// problem is the decoded body of a problem response.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
	Key      string `json:"key"`
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
	if p.Status != status || p.Type != "about:blank" || p.Title != http.StatusText(status) {
		t.Fatalf("got problem %+v, want status %d, type about:blank, title %q", p, status, http.StatusText(status))
	}
	return p
}

// discard is a ResponseWriter that keeps nothing, so the benchmark measures
// the router and the middleware, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
