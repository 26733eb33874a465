package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postOrder creates an order with an Idempotency-Key from a client; empty
// arguments leave the header out.
func postOrder(t testing.TB, c *http.Client, url, key, client, body string) response {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/orders", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if client != "" {
		req.Header.Set("X-Client-ID", client)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := response{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// A retried create with the same Idempotency-Key returns the same order,
// marked as a replay, and creates nothing; the key reused for another order
// is refused; another client's same key is its own.
func TestCreateOrderIdempotent(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	const body = `{"customer":"alice","amount_cents":1299,"currency":"EUR"}`

	first := postOrder(t, ts.Client(), ts.URL, `"order-alice-1"`, "shop-1", body)
	if first.status != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", first.status, first.raw)
	}
	for range 2 {
		retry := postOrder(t, ts.Client(), ts.URL, `"order-alice-1"`, "shop-1", body)
		if retry.status != http.StatusCreated || retry.raw != first.raw || retry.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: got %d %s (Idempotent-Replayed %q), want the first answer %s replayed",
				retry.status, retry.raw, retry.header.Get("Idempotent-Replayed"), first.raw)
		}
		if got, want := retry.header.Get("Location"), first.header.Get("Location"); got != want {
			t.Fatalf("retry: got Location %q, want %q", got, want)
		}
	}

	other := postOrder(t, ts.Client(), ts.URL, `"order-alice-1"`, "shop-1", `{"customer":"alice","amount_cents":5,"currency":"EUR"}`)
	checkProblem(t, other, http.StatusUnprocessableEntity)
	checkProblem(t, postOrder(t, ts.Client(), ts.URL, `"order-alice-1"`, "", body), http.StatusBadRequest)

	second := postOrder(t, ts.Client(), ts.URL, `"order-alice-1"`, "shop-2", body)
	if second.status != http.StatusCreated || second.body["id"] == first.body["id"] {
		t.Fatalf("another client: got %d %s, want 201 and a new order (first was %v)", second.status, second.raw, first.body["id"])
	}
	// Two orders in all: none was created by the retries or the refusals.
	next := int64(second.body["id"].(float64)) + 1
	checkProblem(t, do(t, ts.Client(), "GET", fmt.Sprintf("%s/orders/%d", ts.URL, next), ""), http.StatusNotFound)
	if got := int64(second.body["id"].(float64)) - int64(first.body["id"].(float64)); got != 1 {
		t.Fatalf("got order ids %v and %v, want consecutive ids", first.body["id"], second.body["id"])
	}
}
