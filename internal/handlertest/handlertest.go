// Package handlertest is what the tests of padlock's HTTP middlewares
// (httplock for net/http, middleware for Gin) share: a Locker on a fresh
// Redis server, a request served to a handler, and the check of a problem
// response (RFC 9457), which both answer alike. Only tests import it.
package handlertest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/lockkey"
)

// NewLocker returns a Locker on a fresh Redis server, closed when t ends,
// with the server and a client of it.
func NewLocker(t testing.TB, opts ...padlock.LockerOption) (*padlock.Locker, *redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	return LockerOn(t, rdb, opts...), srv, rdb
}

// Owner is the Options.Owner of NamedLocker's locks: the process.
const Owner = "host=web-1 pid=7"

// NamedLocker is NewLocker for the tests of who a face's locks name: its
// locks name Owner, and it comes with a Semaphore of one permit and a
// Redactor with a fixed secret, as a fleet shares one.
func NamedLocker(t testing.TB) (*padlock.Locker, *padlock.Semaphore, *lockkey.Redactor, *redis.Client) {
	t.Helper()
	l, _, rdb := NewLocker(t, padlock.WithDefaults(padlock.Options{Owner: Owner}))
	sem, err := l.Semaphore(1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := lockkey.NewRedactor(lockkey.WithRedactSecret([]byte("fleet-wide secret, 16+ bytes")))
	if err != nil {
		t.Fatal(err)
	}
	return l, sem, r, rdb
}

// Bearer is a caller func of httplock.WithCaller for tests: the API key
// a request carries as "Authorization: Bearer <key>", a secret that no
// lock may show as it is.
func Bearer(_ context.Context, r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// LockerOn returns a Locker on client (another process's, say), closed
// when t ends. It ends the test when padlock.New refuses client.
func LockerOn(t testing.TB, client redis.UniversalClient, opts ...padlock.LockerOption) *padlock.Locker {
	t.Helper()
	l, err := padlock.New(client, opts...)
	if err != nil {
		t.Fatalf("padlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// Serve serves a request with body (JSON when not empty) to h and returns
// the response.
func Serve(h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	return ServeRequest(h, NewRequest(method, target, body))
}

// NewRequest returns a request with body, sent as JSON when not empty.
func NewRequest(method, target, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// ServeRequest serves req to h and returns the response.
func ServeRequest(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// Problem is the decoded body of a problem response.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Instance  string `json:"instance"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
}

// CheckProblem checks that w is a problem response with status and
// returns its body.
func CheckProblem(t testing.TB, w *httptest.ResponseRecorder, status int) Problem {
	t.Helper()
	if w.Code != status {
		t.Fatalf("got status %d (body %s), want %d", w.Code, w.Body, status)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("got Content-Type %q, want application/problem+json", ct)
	}
	var p Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("got body %q: %v", w.Body, err)
	}
	if p.Status != status || p.Type != "about:blank" || p.Title != http.StatusText(status) {
		t.Fatalf("got problem %+v, want status %d, type about:blank, title %q", p, status, http.StatusText(status))
	}
	return p
}
