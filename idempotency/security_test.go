package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padlockgo/padlock/idempotency"
)

// lookalikes are pairs of account names that Unicode normalization (NFC)
// makes one: precomposed and decomposed, and a letter beside the sign that
// normalizes to it (Kelvin, Ohm).
var lookalikes = []struct{ name, a, b string }{
	{"decomposed", "jos\u00e9", "jose\u0301"},
	{"kelvin sign", "Kim", "\u212Aim"},
	{"ohm sign", "\u03a9mega", "\u2126mega"},
}

// accounts stands in for an authentication step: the bearer token names
// the account, whatever its name's bytes.
func accounts(names map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, ok := names[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]; ok {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		}
		next.ServeHTTP(w, r)
	})
}

// The attack: accounts whose names differ only in their Unicode spelling
// were one caller. Account B, sending A's key and body, got A's stored
// answer as a replay; B could squat A's keys; B's stored answers counted
// against A's quota. An identity is opaque bytes now: each account has its
// own answers, keys and quota.
func TestAttackLookalikeCallers(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := userID(r)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d of %q", runs.Add(1), u)
	})
	for _, tt := range lookalikes {
		t.Run(tt.name, func(t *testing.T) {
			names := map[string]string{"a": tt.a, "b": tt.b}
			h := accounts(names, idempotency.New(l, rdb, userID, idempotency.WithRecordPrefix("idem:replay:"+tt.name+":"))(handler))
			a := []string{"Authorization", "Bearer a"}
			b := []string{"Authorization", "Bearer b"}

			first := send(h, "POST", "/orders", `{"item":"book"}`, "k-replay", a...)
			if first.Code != http.StatusCreated {
				t.Fatalf("A: got %d %s, want 201", first.Code, first.Body)
			}
			w := send(h, "POST", "/orders", `{"item":"book"}`, "k-replay", b...)
			if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" || !strings.Contains(w.Body.String(), fmt.Sprintf("%q", tt.b)) {
				t.Fatalf("B with A's key and body: got %d %s (replayed %q), want B's own 201",
					w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
			}
		})
		t.Run(tt.name+" squat", func(t *testing.T) {
			names := map[string]string{"a": tt.a, "b": tt.b}
			h := accounts(names, idempotency.New(l, rdb, userID, idempotency.WithRecordPrefix("idem:squat:"+tt.name+":"))(handler))
			// B goes first with A's next key and another body.
			if w := send(h, "POST", "/orders", `{"item":"nothing"}`, "k-a", "Authorization", "Bearer b"); w.Code != http.StatusCreated {
				t.Fatalf("B: got %d %s, want 201", w.Code, w.Body)
			}
			w := send(h, "POST", "/orders", `{"item":"book"}`, "k-a", "Authorization", "Bearer a")
			if w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), fmt.Sprintf("%q", tt.a)) {
				t.Fatalf("A after B sent its key first: got %d %s, want A's own 201", w.Code, w.Body)
			}
		})
		t.Run(tt.name+" quota", func(t *testing.T) {
			names := map[string]string{"a": tt.a, "b": tt.b}
			h := accounts(names, idempotency.New(l, rdb, userID, idempotency.WithQuota(1, 0),
				idempotency.WithRecordPrefix("idem:quota:"+tt.name+":"))(handler))
			if w := send(h, "POST", "/orders", `{"item":"pen"}`, "k-b", "Authorization", "Bearer b"); w.Code != http.StatusCreated {
				t.Fatalf("B: got %d %s, want 201", w.Code, w.Body)
			}
			w := send(h, "POST", "/orders", `{"item":"book"}`, "k-a", "Authorization", "Bearer a")
			if w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), fmt.Sprintf("%q", tt.a)) {
				t.Fatalf("A with a quota of one, after B stored an answer: got %d %s, want A's own 201", w.Code, w.Body)
			}
		})
	}
}

// The Idempotency-Key is the client's own opaque identifier too: only its
// Structured Field syntax is read (quoted or bare is one key), never its
// case or spelling, and non-ASCII keys, which a normalization could merge,
// are refused.
func TestKeyOpaque(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	h := idempotency.New(l, rdb, tester)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d", runs.Add(1))
	}))
	lower := send(h, "POST", "/orders", "{}", "order-k1")
	upper := send(h, "POST", "/orders", "{}", "ORDER-K1")
	if lower.Body.String() != "run 1" || upper.Body.String() != "run 2" {
		t.Fatalf("got %q and %q for keys differing in case, want two runs", lower.Body, upper.Body)
	}
	checkReplay(t, send(h, "POST", "/orders", "{}", `"order-k1"`), lower)
	for _, k := range []string{"order-\u212A1", `"order-\u212A1"`, "jos\u00e9", `"jose\u0301"`} {
		checkProblem(t, send(h, "POST", "/orders", "{}", k), http.StatusBadRequest)
	}
	if got := runs.Load(); got != 2 {
		t.Fatalf("got %d runs, want 2", got)
	}
}

// The attack: http.TimeoutHandler inside the middleware answers 503 and
// returns while the handler runs on; the middleware released the key, and
// each retry started another run beside the first. Now the key stays busy
// (409 with Retry-After) for one lease after such an answer, and frees
// itself after it. The same holds for a 408 or 504 answered directly.
func TestTimeoutInside(t *testing.T) {
	t.Parallel() // a server of its own; it waits out a lease
	l, _, rdb := newLocker(t)
	const lease = 2 * time.Second
	var running, maxRunning, runs atomic.Int64
	entered := make(chan struct{}, 10)
	finish := make(chan struct{})
	done := make(chan struct{}, 10)
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		defer func() { running.Add(-1); done <- struct{}{} }()
		for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
		}
		runs.Add(1)
		entered <- struct{}{}
		<-finish
		w.WriteHeader(http.StatusCreated)
	})
	h := idempotency.New(l, rdb, tester, idempotency.WithInFlightTTL(lease))(
		http.TimeoutHandler(slow, 50*time.Millisecond, "timed out"))

	first := send(h, "POST", "/orders", "{}", "k1")
	if first.Code != http.StatusServiceUnavailable {
		t.Fatalf("got %d %s, want the timeout's 503", first.Code, first.Body)
	}
	<-entered // the handler runs on
	var w *httptest.ResponseRecorder
	for range 3 {
		w = send(h, "POST", "/orders", "{}", "k1")
		checkProblem(t, w, http.StatusConflict)
		if ra := w.Header().Get("Retry-After"); ra == "" {
			t.Fatal("got no Retry-After on the 409, want one")
		}
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("got %d runs, want 1 while the first runs on", got)
	}
	close(finish)
	<-done
	// Past the lease the key frees itself: a retry runs.
	deadline := time.Now().Add(lease + 10*time.Second)
	for {
		w = send(h, "POST", "/orders", "{}", "k1")
		if w.Code != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := runs.Load(); got != 2 || w.Code == http.StatusConflict {
		t.Fatalf("after the lease: got %d %s, %d runs, want a second run", w.Code, w.Body, got)
	}

	for _, status := range []int{http.StatusRequestTimeout, http.StatusGatewayTimeout} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var runs atomic.Int64
			h := idempotency.New(l, rdb, tester, idempotency.WithInFlightTTL(lease))(
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					w.WriteHeader(status)
				}))
			key := fmt.Sprintf("k%d", status)
			if w := send(h, "POST", "/orders", "{}", key); w.Code != status {
				t.Fatalf("got %d, want %d", w.Code, status)
			}
			checkProblem(t, send(h, "POST", "/orders", "{}", key), http.StatusConflict)
			if got := runs.Load(); got != 1 {
				t.Fatalf("got %d runs, want 1", got)
			}
		})
	}
	if got := maxRunning.Load(); got != 1 {
		t.Fatalf("got %d runs at once for one key, want 1", got)
	}
}

// The attack: a handler sent 201, flushed, then panicked; nothing was
// stored and a retry ran it again. Now a response that started to go out
// leaves the marker of a response that cannot be replayed, the panic goes
// on to the recovery in front, and a retry gets 409 instead of a second
// run.
func TestPanicAfterSend(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	var recovered atomic.Value
	rec := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					recovered.Store(v)
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
	h := rec(idempotency.New(l, rdb, tester)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "charged")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		panic("after the charge")
	})))
	w := send(h, "POST", "/pay", "{}", "k1")
	if w.Code != http.StatusCreated || w.Body.String() != "charged" || w.Header().Get("Idempotent-Replayable") != "false" {
		t.Fatalf("got %d %q (Idempotent-Replayable %q), want the partial 201 marked not replayable",
			w.Code, w.Body, w.Header().Get("Idempotent-Replayable"))
	}
	if got := recovered.Load(); got != "after the charge" {
		t.Fatalf("got %v recovered in front, want the handler's panic", got)
	}
	p := checkProblem(t, send(h, "POST", "/pay", "{}", "k1"), http.StatusConflict)
	if !strings.Contains(p.Detail, "cannot be replayed") {
		t.Fatalf("got detail %q, want it to say the response cannot be replayed", p.Detail)
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("got %d runs, want 1", got)
	}
}

// The safe order: the timeout outside the middleware. The timeout answers
// the client, the middleware holds the key until the handler returns and
// stores its response; a retry gets 409 meanwhile, then the replay.
func TestTimeoutOutside(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	entered := make(chan struct{}, 1)
	finish := make(chan struct{})
	done := make(chan struct{})
	idem := idempotency.New(l, rdb, tester)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		entered <- struct{}{}
		<-finish
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "created")
		close(done)
	}))
	// The timeout must fire while the handler runs. On a loaded machine it
	// may fire before the middleware got that far (then the handler never
	// starts): try again, under a new key, with a longer timeout.
	key := ""
	for i, d := range []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second, 5 * time.Second} {
		key = fmt.Sprintf("k%d", i+1)
		served := make(chan struct{})
		outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(served)
			idem.ServeHTTP(w, r)
		})
		if w := send(http.TimeoutHandler(outer, d, "timed out"), "POST", "/orders", "{}", key); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("got %d %s, want the timeout's 503", w.Code, w.Body)
		}
		select {
		case <-entered:
		case <-served:
			if runs.Load() == 0 {
				continue // the timeout came before the handler started
			}
			<-entered
		}
		break
	}
	if runs.Load() != 1 {
		t.Fatalf("the handler never ran under a timeout (or ran %d times)", runs.Load())
	}
	// The retries, without the timeout's own clock in the way.
	h := idem
	checkProblem(t, send(h, "POST", "/orders", "{}", key), http.StatusConflict)
	close(finish)
	<-done
	// The middleware stores the response after the handler returns: wait
	// for the replay.
	var w *httptest.ResponseRecorder
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		w = send(h, "POST", "/orders", "{}", key)
		if w.Code != http.StatusConflict || time.Now().After(deadline) {
			break
		}
	}
	if w.Code != http.StatusCreated || w.Body.String() != "created" || w.Header().Get("Idempotent-Replayed") != "true" || runs.Load() != 1 {
		t.Fatalf("got %d %q (replayed %q), %d runs, want the replay of 201 created and 1 run", w.Code, w.Body, w.Header().Get("Idempotent-Replayed"), runs.Load())
	}
}

// The attack: a handler that takes the connection over (Hijack) and
// writes its 201 itself stored nothing and freed the key, and a retry ran
// it a second time; a panic after the hijack skipped the marker too. Now
// a hijack leaves the marker of a response that started and cannot be
// replayed, whatever follows (a return, a panic; any status), and a retry
// gets 409 saying so, over real connections.
func TestHijackIsNeverRunAgain(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panics %v", panics), func(t *testing.T) {
			l, _, rdb := newLocker(t)
			var runs atomic.Int64
			recovered := make(chan any, 1)
			rec := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					defer func() { recovered <- recover() }()
					next.ServeHTTP(w, r)
				})
			}
			ts := httptest.NewServer(rec(idempotency.New(l, rdb, tester)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Errorf("Hijack: %v", err)
					return
				}
				defer conn.Close()
				fmt.Fprint(buf, "HTTP/1.1 201 Created\r\nContent-Length: 7\r\nConnection: close\r\n\r\ncharged")
				if err := buf.Flush(); err != nil {
					t.Errorf("writing the hijacked response: %v", err)
				}
				if panics {
					panic("after the hijack")
				}
			}))))
			defer ts.Close()
			post := func() *http.Response {
				req, _ := http.NewRequest("POST", ts.URL+"/jobs", strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "k1")
				res, err := ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			first := post()
			body, _ := io.ReadAll(first.Body)
			first.Body.Close()
			if first.StatusCode != http.StatusCreated || string(body) != "charged" {
				t.Fatalf("first: got %d %q, want the handler's own 201", first.StatusCode, body)
			}
			// The handler and the middleware are done with the key.
			if v := <-recovered; (v != nil) != panics {
				t.Fatalf("got %v recovered in front, want a panic %v", v, panics)
			}
			retry := post()
			defer retry.Body.Close()
			var p struct {
				Status int
				Detail string
			}
			if err := json.NewDecoder(retry.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
			if retry.StatusCode != http.StatusConflict || retry.Header.Get("Content-Type") != "application/problem+json" ||
				!strings.Contains(p.Detail, "cannot be replayed") {
				t.Fatalf("retry: got %d %s %+v, want 409 problem+json saying it cannot be replayed", retry.StatusCode, retry.Header.Get("Content-Type"), p)
			}
			<-recovered
			if n := runs.Load(); n != 1 {
				t.Fatalf("handler runs: got %d, want 1", n)
			}
		})
	}
}
