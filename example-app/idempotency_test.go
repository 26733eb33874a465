package main

import (
	"fmt"
	"net/http"
	"testing"
)

// postOrder creates an order with an Idempotency-Key, authenticated with
// apiKey; empty arguments leave the header out. extra header fields go
// along.
func postOrder(t testing.TB, c *http.Client, url, key, apiKey, body string, extra ...string) response {
	t.Helper()
	hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {""}}
	if key != "" {
		hdr.Set("Idempotency-Key", key)
	}
	if apiKey != "" {
		hdr.Set("Authorization", "Bearer "+apiKey)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		hdr.Set(extra[i], extra[i+1])
	}
	return doHeader(t, c, "POST", url+"/orders", body, hdr)
}

// A retried create with the same Idempotency-Key returns the same order,
// marked as a replay, and creates nothing; the key reused for another order
// is refused; another caller's same key is its own.
func TestCreateOrderIdempotent(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	const body = `{"customer":"alice","amount_cents":1299,"currency":"EUR"}`
	const key = `"5f0c7a2e-order-1"`

	first := postOrder(t, ts.Client(), ts.URL, key, testKey, body)
	if first.status != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", first.status, first.raw)
	}
	for range 2 {
		retry := postOrder(t, ts.Client(), ts.URL, key, testKey, body)
		if retry.status != http.StatusCreated || retry.raw != first.raw || retry.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: got %d %s (Idempotent-Replayed %q), want the first answer %s replayed",
				retry.status, retry.raw, retry.header.Get("Idempotent-Replayed"), first.raw)
		}
		if got, want := retry.header.Get("Location"), first.header.Get("Location"); got != want {
			t.Fatalf("retry: got Location %q, want %q", got, want)
		}
	}

	other := postOrder(t, ts.Client(), ts.URL, key, testKey, `{"customer":"alice","amount_cents":5,"currency":"EUR"}`)
	checkProblem(t, other, http.StatusUnprocessableEntity)

	second := postOrder(t, ts.Client(), ts.URL, key, testKey2, body)
	if second.status != http.StatusCreated || second.body["id"] == first.body["id"] {
		t.Fatalf("another caller: got %d %s, want 201 and a new order (first was %v)", second.status, second.raw, first.body["id"])
	}
	// Two orders in all: none was created by the retries or the refusals.
	next := int64(second.body["id"].(float64)) + 1
	checkProblem(t, do(t, ts.Client(), "GET", fmt.Sprintf("%s/orders/%d", ts.URL, next), ""), http.StatusNotFound)
	if got := int64(second.body["id"].(float64)) - int64(first.body["id"].(float64)); got != 1 {
		t.Fatalf("got order ids %v and %v, want consecutive ids", first.body["id"], second.body["id"])
	}
}

// The attack of a caller without credentials on another's stored answer:
// shop-1 creates an order with a guessable key; a request without an API
// key, or with a wrong one, that copies everything else it could see or
// guess (the key, the body, the X-Client-ID the app once scoped by) gets
// 401, not shop-1's answer; shop-2, authenticated, sending the same key
// gets an order of its own, and shop-1's key stays usable by shop-1 (no
// one else can burn it).
func TestIdempotencyNeedsAuthentication(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	const body = `{"customer":"alice","amount_cents":1299,"currency":"EUR"}`
	const key = `"order-alice-1"`
	c := ts.Client()

	first := postOrder(t, c, ts.URL, key, testKey, body, "X-Client-ID", "shop-1")
	if first.status != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", first.status, first.raw)
	}
	for _, apiKey := range []string{"", "not-a-key-but-long-enough", testKey + "x"} {
		r := postOrder(t, c, ts.URL, key, apiKey, body, "X-Client-ID", "shop-1")
		checkProblem(t, r, http.StatusUnauthorized)
		if r.header.Get("WWW-Authenticate") == "" || r.header.Get("Idempotent-Replayed") != "" || r.body["id"] != nil {
			t.Fatalf("API key %q: got %d %s (WWW-Authenticate %q), want 401 with a challenge and nothing of shop-1's",
				apiKey, r.status, r.raw, r.header.Get("WWW-Authenticate"))
		}
	}
	bob := postOrder(t, c, ts.URL, key, testKey2, body, "X-Client-ID", "shop-1")
	if bob.status != http.StatusCreated || bob.header.Get("Idempotent-Replayed") != "" || bob.body["id"] == first.body["id"] {
		t.Fatalf("shop-2 with shop-1's key and X-Client-ID: got %d %s, want a new order of its own", bob.status, bob.raw)
	}
	again := postOrder(t, c, ts.URL, key, testKey, body)
	if again.status != http.StatusCreated || again.raw != first.raw || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("shop-1's retry: got %d %s, want its first answer replayed", again.status, again.raw)
	}
	// Every route that acts needs the key; the index and health check do not.
	for _, rt := range []struct{ method, path string }{
		{"POST", "/orders"}, {"GET", "/orders/1"}, {"POST", "/orders/1/pay"}, {"POST", "/payments"}, {"POST", "/jobs/nightly-report/run"},
	} {
		checkProblem(t, doHeader(t, c, rt.method, ts.URL+rt.path, "", http.Header{"Authorization": {""}}), http.StatusUnauthorized)
	}
	for _, path := range []string{"/", "/healthz"} {
		if r := doHeader(t, c, "GET", ts.URL+path, "", http.Header{"Authorization": {""}}); r.status != http.StatusOK {
			t.Fatalf("GET %s without a key: got %d %s, want 200", path, r.status, r.raw)
		}
	}
}
