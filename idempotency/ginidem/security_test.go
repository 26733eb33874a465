package ginidem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/idempotency"
	"github.com/padlockgo/padlock/idempotency/ginidem"
)

// shop is POST /orders as docs/idempotency.md sets it up: an authentication step
// (a bearer token names the user), then the middleware, scoped by the
// authenticated user. The handler sets, besides the order, the kind of
// header fields an app's session handling adds to a response.
type shop struct {
	r    *gin.Engine
	runs atomic.Int64
}

func newShop(t testing.TB) *shop {
	t.Helper()
	l, _, rdb := newLocker(t)
	s := &shop{r: gin.New()}
	tokens := map[string]string{"alice-token": "alice", "bob-token": "bob", "mallory-token": "mallory"}
	auth := func(c *gin.Context) {
		if u, ok := tokens[strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")]; ok {
			c.Set("user", u)
		}
	}
	user := func(c *gin.Context) (string, error) { return c.GetString("user"), nil }
	s.r.POST("/orders", auth, ginidem.New(l, rdb, user), func(c *gin.Context) {
		n := s.runs.Add(1)
		body, _ := c.GetRawData()
		c.Header("X-Session-Token", fmt.Sprintf("session-of-%s", c.GetString("user")))
		c.Header("Authentication-Info", `nextnonce="47364c23432d2e131a5fb210812c"`)
		c.SetCookie("sid", "secret-"+c.GetString("user"), 3600, "/", "", true, true)
		c.Header("Location", fmt.Sprintf("/orders/%d", n))
		c.JSON(http.StatusCreated, gin.H{"id": n, "user": c.GetString("user"), "order": string(body)})
	})
	return s
}

// post sends a create with key, body and header fields, name then value.
func (s *shop) post(key, contentType, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Idempotency-Key", key)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	s.r.ServeHTTP(w, req)
	return w
}

const orderBody = `{"item":"book","amount_cents":1299}`

// credentialFields are the response fields a replay must never carry.
var credentialFields = []string{"X-Session-Token", "Authentication-Info", "Set-Cookie"}

// The attack: without credentials, a copied X-Client-ID and Alice's key and
// body replayed Alice's order and her session headers. Now the request
// carries no identity and is refused with 401; a signed-in Mallory sending
// the same gets her own order; and Alice's own replay carries no session
// fields either.
func TestAttackCopiedClientID(t *testing.T) {
	s := newShop(t)
	const key = `"5f0c7d3e-9b1a-4c2e-8f6d-3a2b1c0d9e8f"`
	alice := s.post(key, "application/json", orderBody, "Authorization", "Bearer alice-token", "X-Client-ID", "shop-1")
	if alice.Code != http.StatusCreated || alice.Header().Get("X-Session-Token") != "session-of-alice" {
		t.Fatalf("setup: got %d %s (session %q), want 201 with Alice's session", alice.Code, alice.Body, alice.Header().Get("X-Session-Token"))
	}

	anon := s.post(key, "application/json", orderBody, "X-Client-ID", "shop-1")
	p := checkProblem(t, anon, http.StatusUnauthorized)
	if p.Detail != "this operation requires an authenticated caller" || strings.Contains(anon.Body.String(), "alice") {
		t.Fatalf("got %+v, body %s, want the 401 detail and nothing of Alice's", p, anon.Body)
	}
	for _, f := range credentialFields {
		if v := anon.Header().Get(f); v != "" {
			t.Fatalf("got %s %q without credentials, want none", f, v)
		}
	}

	mallory := s.post(key, "application/json", orderBody, "Authorization", "Bearer mallory-token", "X-Client-ID", "shop-1")
	if mallory.Code != http.StatusCreated || mallory.Header().Get("Idempotent-Replayed") != "" || !strings.Contains(mallory.Body.String(), `"user":"mallory"`) {
		t.Fatalf("Mallory signed in: got %d %s (replayed %q), want her own new order", mallory.Code, mallory.Body, mallory.Header().Get("Idempotent-Replayed"))
	}

	again := s.post(key, "application/json", orderBody, "Authorization", "Bearer alice-token", "X-Client-ID", "shop-1")
	checkReplay(t, again, alice)
	if got := again.Header().Get("Location"); got != "/orders/1" {
		t.Fatalf("got Location %q on Alice's replay, want /orders/1", got)
	}
	for _, f := range credentialFields {
		if v := again.Header().Get(f); v != "" {
			t.Fatalf("got %s %q on a replay, want none: a replay never hands out credentials", f, v)
		}
	}
	if got := s.runs.Load(); got != 2 {
		t.Fatalf("got %d handler runs, want 2 (Alice's and Mallory's)", got)
	}
}

// The attack: the same bytes sent as text/plain (as a cross-site form can
// send them, riding Alice's session) replayed the answer to her JSON
// request. Now the Content-Type is part of the request, so it is a
// different request with the same key: 422. Spellings of the same type
// are the same request.
func TestAttackTextPlainReplay(t *testing.T) {
	s := newShop(t)
	const key = `"0d1e2f3a-4b5c-4d6e-8f7a-8b9c0d1e2f3a"`
	auth := []string{"Authorization", "Bearer alice-token"}
	first := s.post(key, "application/json; charset=utf-8", orderBody, auth...)
	if first.Code != http.StatusCreated {
		t.Fatalf("setup: got %d %s, want 201", first.Code, first.Body)
	}
	for _, ct := range []string{"text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "application/json"} {
		t.Run(ct, func(t *testing.T) {
			checkProblem(t, s.post(key, ct, orderBody, auth...), http.StatusUnprocessableEntity)
		})
	}
	checkReplay(t, s.post(key, "Application/JSON; Charset=UTF-8", orderBody, auth...), first)
	if got := s.runs.Load(); got != 1 {
		t.Fatalf("got %d handler runs, want 1", got)
	}
}

// The attack: Mallory sent Bob's guessable key first, with a spoofed
// X-Client-ID, and Bob's real request got 422 for 24 hours. Now a request
// without credentials stores nothing (401), and one with Mallory's
// credentials is scoped to Mallory: Bob's request runs.
func TestAttackKeySquatting(t *testing.T) {
	s := newShop(t)
	const key = "order-bob-1" // guessable, as docs/idempotency.md no longer shows
	checkProblem(t, s.post(key, "application/json", `{"item":"nothing"}`, "X-Client-ID", "bob"), http.StatusUnauthorized)
	squat := s.post(key, "application/json", `{"item":"nothing"}`, "Authorization", "Bearer mallory-token", "X-Client-ID", "bob")
	if squat.Code != http.StatusCreated {
		t.Fatalf("Mallory's own request: got %d %s, want 201", squat.Code, squat.Body)
	}
	bob := s.post(key, "application/json", orderBody, "Authorization", "Bearer bob-token", "X-Client-ID", "bob")
	if bob.Code != http.StatusCreated || !strings.Contains(bob.Body.String(), `"user":"bob"`) || bob.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("Bob: got %d %s, want his own order, 201", bob.Code, bob.Body)
	}
}

// A middleware without a caller would share one scope among everyone: it
// does not build.
func TestNilCallerPanics(t *testing.T) {
	l, _, rdb := newLocker(t)
	defer func() {
		want := "ginidem: New: nil caller func; pass the authenticated identity (see New)"
		if got := fmt.Sprint(recover()); got != want {
			t.Fatalf("got panic %q, want %q", got, want)
		}
	}()
	ginidem.New(l, rdb, nil)
}

// Only the allowlisted fields of a response are stored and replayed: the
// session fields the handler set reach the first response only, even for
// the same caller.
func TestStoredHeadersAllowlist(t *testing.T) {
	s := newShop(t)
	auth := []string{"Authorization", "Bearer alice-token"}
	first := s.post("k1", "application/json", orderBody, auth...)
	replay := s.post("k1", "application/json", orderBody, auth...)
	checkReplay(t, replay, first)
	for _, f := range credentialFields {
		if first.Header().Get(f) == "" {
			t.Fatalf("got no %s on the first response, want the handler's", f)
		}
		if v := replay.Header().Get(f); v != "" {
			t.Fatalf("got %s %q on the replay, want none", f, v)
		}
	}
	for _, f := range []string{"Location", "Content-Type"} {
		if got, want := replay.Header().Get(f), first.Header().Get(f); got != want {
			t.Fatalf("got %s %q on the replay, want %q", f, got, want)
		}
	}
}

// lookalikes are pairs of account names that Unicode normalization (NFC)
// makes one: precomposed and decomposed, and a letter beside the sign that
// normalizes to it (Kelvin, Ohm).
var lookalikes = []struct{ name, a, b string }{
	{"decomposed", "jos\u00e9", "jose\u0301"},
	{"kelvin sign", "Kim", "\u212Aim"},
	{"ohm sign", "\u03a9mega", "\u2126mega"},
}

// The attack: accounts whose names differ only in their Unicode spelling
// were one caller: B got A's stored answer as a replay, B's first use of
// A's key made A's request a 422, and B's stored answers counted against
// A's quota. An identity is opaque bytes now.
func TestAttackLookalikeCallers(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	for _, tt := range lookalikes {
		t.Run(tt.name, func(t *testing.T) {
			names := map[string]string{"a": tt.a, "b": tt.b}
			r := gin.New()
			r.POST("/orders", func(c *gin.Context) {
				c.Set("user", names[strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")])
			},
				ginidem.New(l, rdb, func(c *gin.Context) (string, error) { return c.GetString("user"), nil },
					idempotency.WithQuota(2, 0), idempotency.WithRecordPrefix("idem:"+tt.name+":")),
				func(c *gin.Context) { c.String(http.StatusCreated, "order %d of %q", runs.Add(1), c.GetString("user")) })
			post := func(k, body, token string) *httptest.ResponseRecorder {
				return send(r, "POST", "/orders", body, key(k), "Authorization", "Bearer "+token)
			}
			mine := func(w *httptest.ResponseRecorder, user string) bool {
				return w.Code == http.StatusCreated && w.Header().Get("Idempotent-Replayed") == "" && strings.Contains(w.Body.String(), fmt.Sprintf("%q", user))
			}
			// Replay: B sends A's key and body.
			if w := post("k1", `{"item":"book"}`, "a"); !mine(w, tt.a) {
				t.Fatalf("A: got %d %s, want 201", w.Code, w.Body)
			}
			if w := post("k1", `{"item":"book"}`, "b"); !mine(w, tt.b) {
				t.Fatalf("B with A's key and body: got %d %s (replayed %q), want B's own 201", w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
			}
			// Squat: B sends A's next key first. B's quota of 2 is full now.
			if w := post("k2", `{"item":"nothing"}`, "b"); !mine(w, tt.b) {
				t.Fatalf("B: got %d %s, want 201", w.Code, w.Body)
			}
			// A's own request with that key runs, within A's own quota.
			if w := post("k2", `{"item":"book"}`, "a"); !mine(w, tt.a) {
				t.Fatalf("A after B squatted its key and filled B's quota: got %d %s, want A's own 201", w.Code, w.Body)
			}
		})
	}
}

// The attack: 40 first requests at once with distinct keys under a quota
// of 5 all ran and stored. Now 5 run; the rest get 429.
func TestAttackQuotaConcurrent(t *testing.T) {
	l, _, rdb := newLocker(t)
	const n, limit = 40, 5
	decided := make(chan struct{}, n)
	release := make(chan struct{})
	var runs atomic.Int64
	r := gin.New()
	r.POST("/orders", ginidem.New(l, rdb, tester, idempotency.WithQuota(limit, 0)), func(c *gin.Context) {
		runs.Add(1)
		decided <- struct{}{}
		<-release
		c.Status(http.StatusCreated)
	})
	codes := make(chan int, n)
	for i := range n {
		go func() {
			w := send(r, "POST", "/orders", "{}", key(fmt.Sprintf("k%d", i)))
			if w.Code != http.StatusCreated {
				decided <- struct{}{}
			}
			codes <- w.Code
		}()
	}
	for range n {
		<-decided
	}
	close(release)
	got := map[int]int{}
	for range n {
		got[<-codes]++
	}
	if got[http.StatusCreated] != limit || got[http.StatusTooManyRequests] != n-limit || runs.Load() != limit {
		t.Fatalf("got answers %v and %d runs, want %d 201s, %d 429s and %d runs", got, runs.Load(), limit, n-limit, limit)
	}
}

// The attack: http.TimeoutHandler inside the middleware answered 503 while
// the handler ran on, and each retry started another run beside it. Now
// the key stays busy (409) for one lease after such an answer.
func TestAttackTimeoutInside(t *testing.T) {
	l, _, rdb := newLocker(t)
	var runs atomic.Int64
	entered := make(chan struct{}, 4)
	finish := make(chan struct{})
	defer close(finish)
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		entered <- struct{}{}
		<-finish
		w.WriteHeader(http.StatusCreated)
	})
	r := gin.New()
	r.POST("/orders", ginidem.New(l, rdb, tester, idempotency.WithInFlightTTL(30*time.Second)),
		gin.WrapH(http.TimeoutHandler(slow, 50*time.Millisecond, "timed out")))
	if w := send(r, "POST", "/orders", "{}", key("k1")); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("got %d %s, want the timeout's 503", w.Code, w.Body)
	}
	<-entered
	for range 3 {
		w := send(r, "POST", "/orders", "{}", key("k1"))
		checkProblem(t, w, http.StatusConflict)
		if w.Header().Get("Retry-After") == "" {
			t.Fatal("got no Retry-After on the 409, want one")
		}
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("got %d runs, want 1", got)
	}
}

// The attack: a handler sent 201, flushed, then panicked; nothing was
// stored and a retry ran it again. Now the response that started to go out
// leaves its marker, whether gin's recovery is in front of the middleware
// (the panic goes on to it) or behind it, and a retry gets 409.
func TestAttackPanicAfterSend(t *testing.T) {
	recovery := gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, err any) {
		c.String(http.StatusInternalServerError, " recovered: %v", err)
	})
	tests := []struct {
		name  string
		setup func(r *gin.Engine, idem, h gin.HandlerFunc)
	}{
		{"recovery in front", func(r *gin.Engine, idem, h gin.HandlerFunc) {
			r.Use(recovery)
			r.POST("/pay", idem, h)
		}},
		{"recovery behind", func(r *gin.Engine, idem, h gin.HandlerFunc) {
			r.POST("/pay", idem, recovery, h)
		}},
	}
	l, _, rdb := newLocker(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int64
			r := gin.New()
			tt.setup(r, ginidem.New(l, rdb, tester), func(c *gin.Context) {
				runs.Add(1)
				c.String(http.StatusCreated, "charged")
				c.Writer.Flush()
				panic("after the charge")
			})
			k := key(strconv.Quote(tt.name))
			w := send(r, "POST", "/pay", "", k)
			if w.Code != http.StatusCreated || !strings.HasPrefix(w.Body.String(), "charged") {
				t.Fatalf("got %d %q, want the partial 201", w.Code, w.Body)
			}
			p := checkProblem(t, send(r, "POST", "/pay", "", k), http.StatusConflict)
			if !strings.Contains(p.Detail, "cannot be replayed") {
				t.Fatalf("got detail %q, want it to say the response cannot be replayed", p.Detail)
			}
			if got := runs.Load(); got != 1 {
				t.Fatalf("got %d runs, want 1", got)
			}
		})
	}
}
