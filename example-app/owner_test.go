package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	_ "modernc.org/sqlite"
)

// An order is its creator's. Another caller that guesses its id (ids are
// sequential) gets what it gets for an order that does not exist, 404 with
// the same body, on every order route; it charges nothing, reaches no
// provider and takes no lock. The owner still reads and pays it.
func TestOrdersAreTheirCreators(t *testing.T) {
	cfg := testConfig(t)
	cfg.payWait = 0
	a, ts := startApp(t, cfg)
	c := ts.Client()
	id := createOrder(t, ts) // shop-1's
	var calls atomic.Int64
	provider := a.server.authorize
	a.server.authorize = func(ctx context.Context, o Order) error {
		calls.Add(1)
		return provider(ctx, o)
	}
	other := http.Header{"Authorization": {"Bearer " + testKey2}, "Content-Type": {"application/json"}}
	const missing = 999999
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/orders/%d", ""},
		{"POST", "/orders/%d/pay", ""},
		{"POST", "/payments", `{"order_id":%d}`},
	} {
		req := func(id int64) response {
			path, body := rt.path, rt.body
			if body != "" {
				body = fmt.Sprintf(body, id)
			} else {
				path = fmt.Sprintf(path, id)
			}
			return doHeader(t, c, rt.method, ts.URL+path, body, other)
		}
		got, none := req(id), req(missing)
		checkProblem(t, got, http.StatusNotFound)
		checkProblem(t, none, http.StatusNotFound)
		if got.body["detail"] != none.body["detail"] {
			t.Errorf("%s %s on another caller's order: got detail %v, want the missing order's, %v", rt.method, rt.path, got.body["detail"], none.body["detail"])
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("another caller's pay requests reached the provider %d times, want 0", n)
	}
	if keys, err := a.backend.nodes[0].Keys(context.Background(), "padlock:{order:*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("got lock keys %q (%v), want none taken for another caller's order", keys, err)
	}
	charges, err := a.store.charges(context.Background(), id)
	if err != nil || len(charges) != 0 {
		t.Fatalf("got %d charges (%v), want none", len(charges), err)
	}

	// The owner is not affected.
	if r := do(t, c, "POST", fmt.Sprintf("%s/orders/%d/pay", ts.URL, id), ""); r.status != http.StatusOK || r.body["charge"] == nil {
		t.Fatalf("owner's pay: got %d %s, want 200 with a charge", r.status, r.raw)
	}
	if r := do(t, c, "GET", fmt.Sprintf("%s/orders/%d", ts.URL, id), ""); r.status != http.StatusOK {
		t.Fatalf("owner's GET: got %d %s, want 200", r.status, r.raw)
	}
	// Nor does another caller's pay request see the owner's payment: still
	// 404, never "already paid".
	checkProblem(t, doHeader(t, c, "POST", fmt.Sprintf("%s/orders/%d/pay", ts.URL, id), "", other), http.StatusNotFound)
}

// A database made before orders had owners gains the column when the app
// opens it; its old orders belong to no caller.
func TestStoreMigratesOwner(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "orders.db")
	old, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE orders (
			id           INTEGER PRIMARY KEY AUTOINCREMENT,
			customer     TEXT    NOT NULL,
			amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
			currency     TEXT    NOT NULL,
			status       TEXT    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'paid')),
			last_fence   INTEGER NOT NULL DEFAULT 0,
			created_at   INTEGER NOT NULL,
			paid_at      INTEGER
		)`,
		`INSERT INTO orders (customer, amount_cents, currency, created_at) VALUES ('alice', 100, 'EUR', 0)`,
	} {
		if _, err := old.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	for range 2 { // opening again finds the column and changes nothing
		st, err := openStore(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.order(ctx, "shop-1", 1); !errors.Is(err, errNotFound) {
			t.Fatalf("an order from before owners: got %v, want errNotFound for every caller", err)
		}
		o, err := st.createOrder(ctx, "shop-1", "bob", 200, "EUR")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := st.order(ctx, "shop-1", o.ID); err != nil || got.Owner != "shop-1" {
			t.Fatalf("a new order: got %+v, %v; want shop-1's", got, err)
		}
		st.close()
	}
}
