package idempotency_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/idempotency"
)

// userKey is the context key an authentication step in front leaves the
// user under, in these tests.
type userKey struct{}

// authenticate stands in for an authentication middleware: the bearer
// token is the user.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, ok := bearer(r); ok {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(r *http.Request) (string, bool) {
	const p = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(p) || h[:len(p)] != p {
		return "", false
	}
	return h[len(p):], true
}

func userID(r *http.Request) (string, error) {
	u, _ := r.Context().Value(userKey{}).(string)
	return u, nil
}

// On an http.ServeMux: the first request runs, a retry is replayed, the
// key is scoped by the route pattern, and the handler sees the key and the
// in-flight lock.
func TestNewServeMux(t *testing.T) {
	l, srv, rdb := newLocker(t)
	var runs atomic.Int64
	idem := idempotency.New(l, rdb, tester)
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", idem(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		lk := padlock.FromContext(r.Context())
		if lk == nil {
			t.Error("padlock.FromContext: got nil, want the in-flight lock")
			return
		}
		w.Header().Set("Location", fmt.Sprintf("/payments/%d", n))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s %s", r.PathValue("id"), idempotency.KeyFrom(r.Context()), lk.Key())
	})))

	first := send(mux, "POST", "/orders/7/pay", `{"amount":1}`, `"k1"`)
	if want := "7 k1 idempotency:POST /orders/<id>/pay:tester:k1"; first.Code != http.StatusCreated || first.Body.String() != want {
		t.Fatalf("got %d %q, want 201 %q", first.Code, first.Body, want)
	}
	w := send(mux, "POST", "/orders/7/pay", `{"amount":1}`, "k1")
	checkReplay(t, w, first)
	if got := w.Header().Get("Location"); got != "/payments/1" {
		t.Fatalf("got Location %q on the replay, want /payments/1", got)
	}
	if n, err := rdb.Exists(context.Background(), "padlock:idempotency:POST /orders/<id>/pay:tester:k1").Result(); n != 1 || err != nil {
		t.Fatalf("got %d, %v for the record (keys %v), want it stored", n, err, srv.Keys(t))
	}
	checkProblem(t, send(mux, "POST", "/orders/8/pay", `{"amount":1}`, "k1"), http.StatusUnprocessableEntity)
	checkProblem(t, send(mux, "POST", "/orders/7/pay", `{"amount":1}`, ""), http.StatusBadRequest)
	if got := runs.Load(); got != 1 {
		t.Fatalf("got %d handler runs, want 1", got)
	}
	if got := idempotency.KeyFrom(context.Background()); got != "" {
		t.Fatalf("got KeyFrom %q on a bare context, want empty", got)
	}
}

// Keys are scoped by the caller the authentication step in front put in
// the request's context.
func TestNewCallerFromContext(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	h := authenticate(idempotency.New(l, rdb, userID)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "run %d", runs.Add(1))
	})))
	alice := send(h, "POST", "/orders", "{}", "k1", "Authorization", "Bearer alice")
	bob := send(h, "POST", "/orders", "{}", "k1", "Authorization", "Bearer bob")
	if alice.Body.String() != "run 1" || bob.Body.String() != "run 2" {
		t.Fatalf("got alice %q, bob %q, want runs 1 and 2", alice.Body, bob.Body)
	}
	checkReplay(t, send(h, "POST", "/orders", "{}", "k1", "Authorization", "Bearer alice"), alice)
	// No identity: 401, never a replay from a scope shared by anonymous
	// callers.
	p := checkProblem(t, send(h, "POST", "/orders", "{}", "k1"), http.StatusUnauthorized)
	if p.Detail != "this operation requires an authenticated caller" || runs.Load() != 2 {
		t.Fatalf("got detail %q, %d runs, want the 401 detail and 2 runs", p.Detail, runs.Load())
	}
}

// WithError is told what the client does not see: here the cause of a 503.
func TestNewWithError(t *testing.T) {
	l, srv, rdb := newLocker(t)
	var told atomic.Value
	h := idempotency.New(l, rdb, tester, idempotency.WithError(func(r *http.Request, err error) { told.Store(err) }))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler ran") }))
	srv.Kill(t)
	checkProblem(t, send(h, "POST", "/orders", "{}", "k1"), http.StatusServiceUnavailable)
	if err, _ := told.Load().(error); err == nil || !strings.Contains(err.Error(), "idempotency: reading the record") {
		t.Fatalf("got %v told, want the read error", told.Load())
	}
}

// 50 identical requests at once through net/http with a wait: the handler
// runs once and all get its answer.
func TestNewConcurrent(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	h := idempotency.New(l, rdb, tester, idempotency.WithWaitForInFlight(30*time.Second))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(50 * time.Millisecond) // the duplicates arrive while it runs
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, "order %d", runs.Add(1))
		}))
	const n = 50
	res := make([]*httptest.ResponseRecorder, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			res[i] = send(h, "POST", "/orders", `{"item":"book"}`, "same")
		})
	}
	close(start)
	wg.Wait()
	replays := 0
	for _, w := range res {
		if w.Code != http.StatusCreated || w.Body.String() != "order 1" {
			t.Fatalf("got %d %q, want 201 order 1", w.Code, w.Body)
		}
		if w.Header().Get("Idempotent-Replayed") == "true" {
			replays++
		}
	}
	if got := runs.Load(); got != 1 || replays != n-1 {
		t.Fatalf("got %d runs and %d replays, want 1 and %d", got, replays, n-1)
	}
}

// What only a net/http writer shows: a flush through
// http.ResponseController streams the response and makes it not
// replayable; a panic stores nothing and a retry runs again.
func TestNewWriter(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	idem := idempotency.New(l, rdb, tester)
	mux := http.NewServeMux()
	mux.Handle("POST /events", idem(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		fmt.Fprint(w, "event 1\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		fmt.Fprint(w, "event 2\n")
	})))
	var panics atomic.Int64
	mux.Handle("POST /boom", recoverer(idem(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if panics.Add(1) == 1 {
			panic("boom")
		}
		fmt.Fprint(w, "second run")
	}))))

	w := send(mux, "POST", "/events", "", "e1")
	if w.Body.String() != "event 1\nevent 2\n" || w.Header().Get("Idempotent-Replayable") != "false" || !w.Flushed {
		t.Fatalf("got %q, Idempotent-Replayable %q, flushed %v, want both events, false, true",
			w.Body, w.Header().Get("Idempotent-Replayable"), w.Flushed)
	}
	checkProblem(t, send(mux, "POST", "/events", "", "e1"), http.StatusConflict)
	if got := runs.Load(); got != 1 {
		t.Fatalf("got %d runs of the streaming handler, want 1", got)
	}

	if w := send(mux, "POST", "/boom", "", "b1"); w.Code != http.StatusInternalServerError {
		t.Fatalf("got %d %q for the panic, want the recoverer's 500", w.Code, w.Body)
	}
	w = send(mux, "POST", "/boom", "", "b1")
	if w.Code != http.StatusOK || w.Body.String() != "second run" {
		t.Fatalf("got %d %q after the panic, want a second run", w.Code, w.Body)
	}
	checkReplay(t, send(mux, "POST", "/boom", "", "b1"), w)
}

// recoverer answers a panic with 500, as a recovery middleware would.
func recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if recover() != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// WithStoredHeaders adds a field to those replayed; the rest of what the
// handler set reaches the first response only.
func TestNewStoredHeaders(t *testing.T) {
	l, _, rdb := newLocker(t)
	h := idempotency.New(l, rdb, tester, idempotency.WithStoredHeaders("x-order-version"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Order-Version", "3")
			w.Header().Set("X-Trace", "t-1")
			w.Header().Set("ETag", `"v3"`)
			w.WriteHeader(http.StatusCreated)
		}))
	first := send(h, "POST", "/orders", "{}", "k1")
	replay := send(h, "POST", "/orders", "{}", "k1")
	checkReplay(t, replay, first)
	for f, want := range map[string]string{"X-Order-Version": "3", "Etag": `"v3"`, "X-Trace": ""} {
		if got := replay.Header().Get(f); got != want {
			t.Fatalf("got %s %q on the replay, want %q", f, got, want)
		}
	}
}

// Bad configuration panics at construction, naming the function and the
// option.
func TestNewPanics(t *testing.T) {
	l, _, rdb := newLocker(t)
	tests := []struct {
		name string
		fn   func()
		want string
	}{
		{"nil locker", func() { idempotency.New(nil, rdb, tester) }, "idempotency: New: nil *padlock.Locker"},
		{"nil option", func() { idempotency.New(l, rdb, tester, nil) }, "idempotency: New: option 1 is nil"},
		{"nil responder", func() { idempotency.New(l, rdb, tester, idempotency.WithResponder(nil)) }, "idempotency: New: WithResponder: nil Responder"},
		{"nil error func", func() { idempotency.NewCore(l, rdb, idempotency.WithError(nil)) }, "idempotency: NewCore: WithError: nil func"},
		{"nil next", func() { idempotency.New(l, rdb, tester)(nil) }, "idempotency: New: nil next handler"},
		{"nil caller", func() { idempotency.New(l, rdb, nil) }, "idempotency: New: nil caller func; pass the authenticated identity (see New)"},
		{"credential header", func() {
			idempotency.New(l, rdb, tester, idempotency.WithStoredHeaders("Content-MD5", "X-Session-Token"))
		},
			`idempotency: New: WithStoredHeaders: "X-Session-Token" may carry credentials (its name holds "session"); it is never stored`},
		{"set-cookie", func() { idempotency.New(l, rdb, tester, idempotency.WithStoredHeaders("set-cookie")) },
			`idempotency: New: WithStoredHeaders: "set-cookie" may carry credentials (its name holds "cookie"); it is never stored`},
		{"authorization", func() { idempotency.New(l, rdb, tester, idempotency.WithStoredHeaders("Proxy-Authorization")) },
			`idempotency: New: WithStoredHeaders: "Proxy-Authorization" may carry credentials (its name holds "auth"); it is never stored`},
		{"hop by hop", func() { idempotency.New(l, rdb, tester, idempotency.WithStoredHeaders("Transfer-Encoding")) },
			`idempotency: New: WithStoredHeaders: "Transfer-Encoding" belongs to the connection or the middleware; it is never stored`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); got != tt.want {
					t.Fatalf("got panic %q, want %q", got, tt.want)
				}
			}()
			tt.fn()
		})
	}
}
