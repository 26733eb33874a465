package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/padlockgo/padlock/internal/handlertest"
)

// What the tests of the HTTP middlewares share (internal/handlertest).
var (
	newLocker    = handlertest.NewLocker
	lockerOn     = handlertest.LockerOn
	checkProblem = handlertest.CheckProblem
)

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
