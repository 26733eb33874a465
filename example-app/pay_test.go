package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The test the app exists for: 200 concurrent pay requests for one order
// charge it exactly once. Every other answer is a 200 that says the order
// was paid already and charged nothing, or a 409 (the lock stayed busy for
// the whole wait); never a second charge, never a 5xx. The provider is
// asked to authorize exactly once: that is the lock's doing (the database
// transaction alone would keep the ledger right, but not stop 200
// authorizations, each a hold on the customer's card).
func TestConcurrentPaysChargeOnce(t *testing.T) {
	tests := []struct {
		name string
		wait time.Duration
	}{
		{"waiting 2s", 2 * time.Second}, // the app's default: most find it paid
		{"no wait", 0},                  // most get 409 at once
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.payWait = tt.wait
			// A connection for every request and patient timeouts: beside
			// two more test runs, requests that waited for one of go-redis's
			// default pool (4 s) rightly got 503, which says nothing of
			// the lock.
			cfg.RedisAddrs[0] = "redis://" + cfg.RedisAddrs[0] + "?pool_size=250&pool_timeout=30s&read_timeout=10s&write_timeout=10s&dial_timeout=10s"
			a, ts := startApp(t, cfg)
			id := createOrder(t, ts)
			var authorizations atomic.Int64
			provider := a.server.authorize
			a.server.authorize = func(ctx context.Context, o Order) error {
				authorizations.Add(1)
				return provider(ctx, o)
			}

			const n = 200
			tr := &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			url := fmt.Sprintf("%s/orders/%d/pay", ts.URL, id)

			results := make([]response, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					results[i] = do(t, client, "POST", url, "")
				})
			}
			close(start)
			wg.Wait()

			var charged, alreadyPaid, busy int
			for i, r := range results {
				switch {
				case r.status == http.StatusOK && r.body["already_paid"] == false && r.body["charge"] != nil:
					charged++
				case r.status == http.StatusOK && r.body["already_paid"] == true && r.body["charge"] == nil:
					alreadyPaid++
				case r.status == http.StatusConflict:
					checkProblem(t, r, http.StatusConflict)
					busy++
				default:
					t.Errorf("response %d: got %d %s, want 200 (charged or already paid) or 409", i, r.status, r.raw)
				}
			}
			charges, err := a.store.charges(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d requests: %d charged, %d already paid, %d busy (409)", n, charged, alreadyPaid, busy)
			if len(charges) != 1 || charged != 1 {
				t.Fatalf("got %d charges in the ledger and %d charging answers, want exactly 1 of each", len(charges), charged)
			}
			if got := authorizations.Load(); got != 1 {
				t.Fatalf("got %d provider authorizations, want 1", got)
			}
			if charged+alreadyPaid+busy != n {
				t.Fatalf("got %d classified answers, want %d", charged+alreadyPaid+busy, n)
			}
		})
	}
}

func TestPaySequence(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	id := createOrder(t, ts)
	url := fmt.Sprintf("%s/orders/%d/pay", ts.URL, id)

	first := do(t, ts.Client(), "POST", url, "")
	if first.status != http.StatusOK || first.body["already_paid"] != false || first.body["charge"] == nil {
		t.Fatalf("first pay: got %d %s, want 200 with a charge", first.status, first.raw)
	}
	fence1 := first.body["fence"].(float64)
	second := do(t, ts.Client(), "POST", url, "")
	if second.status != http.StatusOK || second.body["already_paid"] != true || second.body["charge"] != nil {
		t.Fatalf("second pay: got %d %s, want 200 already_paid without a charge", second.status, second.raw)
	}
	if fence2 := second.body["fence"].(float64); fence2 <= fence1 {
		t.Fatalf("got fences %v then %v, want them rising", fence1, fence2)
	}
	got := do(t, ts.Client(), "GET", fmt.Sprintf("%s/orders/%d", ts.URL, id), "")
	if charges := got.body["charges"].([]any); got.status != http.StatusOK || len(charges) != 1 {
		t.Fatalf("GET order: got %d %s, want 200 with one charge", got.status, got.raw)
	}
}

func TestPayErrors(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	tests := []struct {
		name   string
		path   string
		status int
	}{
		{"unknown order", "/orders/999/pay", http.StatusNotFound},
		{"id not a number", "/orders/abc/pay", http.StatusBadRequest},
		{"id not positive", "/orders/0/pay", http.StatusBadRequest},
		{"GET order unknown", "/orders/999", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "POST"
			if tt.name == "GET order unknown" {
				method = "GET"
			}
			checkProblem(t, do(t, ts.Client(), method, ts.URL+tt.path, ""), tt.status)
		})
	}
}

// While one request pays, a second one for the same order that may not
// wait gets 409 with Retry-After, and charges nothing.
func TestPayBusy(t *testing.T) {
	cfg := testConfig(t)
	cfg.payWait = 0
	a, ts := startApp(t, cfg)
	url, finish := payInFlight(t, a, ts, createOrder(t, ts))
	second := do(t, ts.Client(), "POST", url, "")
	first := finish()

	checkProblem(t, second, http.StatusConflict)
	// The answer names the lock's namespace, never the key: a key may be
	// built from request data that is secret.
	if second.header.Get("Retry-After") == "" || second.body["namespace"] != "order" || second.body["key"] != nil {
		t.Fatalf("got Retry-After %q, namespace %v and key %v; want Retry-After, namespace order and no key",
			second.header.Get("Retry-After"), second.body["namespace"], second.body["key"])
	}
	if first.status != http.StatusOK || first.body["charge"] == nil {
		t.Fatalf("first: got %d %s, want 200 with a charge", first.status, first.raw)
	}
}

// payInFlight starts paying order id through ts with a provider that
// holds on until finish is called, and returns once the payment holds
// the order's lock. finish lets it end (once) and returns its response.
func payInFlight(t *testing.T, a *app, ts *httptest.Server, id int64) (url string, finish func() response) {
	t.Helper()
	inside, done := make(chan struct{}), make(chan struct{})
	a.server.authorize = func(ctx context.Context, _ Order) error {
		close(inside)
		<-done
		return nil
	}
	url = fmt.Sprintf("%s/orders/%d/pay", ts.URL, id)
	var first response
	var wg sync.WaitGroup
	wg.Go(func() { first = do(t, ts.Client(), "POST", url, "") })
	<-inside
	var once sync.Once
	return url, func() response {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
		return first
	}
}

// While a payment runs, the admin side names who holds the order's lock,
// the process, the route and the caller's hash (never the caller, nor its
// API key), and the lock page names that holder beside the refusal of a
// second payment.
func TestPayHolder(t *testing.T) {
	cfg := testConfig(t)
	cfg.payWait = 0
	a, ts := startApp(t, cfg)
	admin := httptest.NewServer(a.admin)
	defer admin.Close()
	url, finish := payInFlight(t, a, ts, createOrder(t, ts))
	defer finish()
	checkProblem(t, do(t, ts.Client(), "POST", url, ""), http.StatusConflict)

	want := processOwner() + " route=/orders/$id/pay caller=#" + keyHash("shop-1")
	locks := do(t, ts.Client(), "GET", admin.URL+"/locks", "")
	held, _ := locks.body["locks"].([]any)
	if len(held) != 1 || held[0].(map[string]any)["owner"] != want {
		t.Errorf("/locks: got %s, want the order's lock held by %q", locks.raw, want)
	}
	page := do(t, ts.Client(), "GET", admin.URL+"/debug/locks?format=json", "")
	refusals, _ := page.body["refusals"].([]any)
	if len(refusals) != 1 || refusals[0].(map[string]any)["holder"] != want {
		t.Errorf("lock page: got refusals %v, want one, held by %q", refusals, want)
	}
	for _, r := range []response{locks, page} {
		if strings.Contains(r.raw, "shop-1") || strings.Contains(r.raw, testKey) {
			t.Errorf("the admin side shows the caller or its API key: %s", r.raw)
		}
	}
}

// A pay request whose lock is lost while the provider works stops, answers
// 409 and charges nothing. Deleting the lock key in Redis stands in for a
// lease that ran out.
func TestPayLockLost(t *testing.T) {
	cfg := testConfig(t)
	cfg.lockTTL = 600 * time.Millisecond // renewed every 200ms: the loss shows fast
	a, ts := startApp(t, cfg)
	id := createOrder(t, ts)
	inside := make(chan struct{})
	a.server.authorize = func(ctx context.Context, _ Order) error {
		close(inside)
		<-ctx.Done()
		return context.Cause(ctx)
	}
	var r response
	var wg sync.WaitGroup
	wg.Go(func() { r = do(t, ts.Client(), "POST", fmt.Sprintf("%s/orders/%d/pay", ts.URL, id), "") })
	<-inside
	rdb := a.backend.nodes[0]
	if err := rdb.Del(context.Background(), fmt.Sprintf("padlock:{order:%d}", id)).Err(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	checkProblem(t, r, http.StatusConflict)
	o, err := a.store.order(context.Background(), "shop-1", id)
	if err != nil {
		t.Fatal(err)
	}
	charges, _ := a.store.charges(context.Background(), id)
	if o.Status != statusPending || len(charges) != 0 {
		t.Fatalf("got status %s and %d charges, want pending and none", o.Status, len(charges))
	}
}

// spelling is one request for an order, spelled some way, and the answers
// it may get: 200 or 409 for a spelling of the order the lock is on, 400
// for one the handler's binding refuses.
type spelling struct {
	path, body string
	refused    bool // the binding refuses it: 400
}

// Every spelling of one order that the handler binds as that order takes
// the one lock on it; fired at once, they make one provider call and one
// charge, and the rest get 409 (the lock is busy: the app is in
// canonicalize mode, so other spellings are read as the same order, not
// refused). JSON numbers the int64 field cannot hold exactly (13.0, 1.3e1,
// "13") are refused with 400, as the binding refuses them, and so are
// bodies that name the field in other letter case or twice.
func TestPaySpellingsOneLock(t *testing.T) {
	cfg := testConfig(t)
	cfg.payWait = 0
	a, ts := startApp(t, cfg)
	id := createOrder(t, ts)
	n := strconv.FormatInt(id, 10)
	spellings := []spelling{
		{path: "/orders/" + n + "/pay"},
		{path: "/orders/0" + n + "/pay"},
		{path: "/orders/+" + n + "/pay"},
		{path: "/orders/%20" + n + "/pay"},
		{path: "/orders/" + n + "%0A/pay"},
		{path: "/payments", body: `{"order_id":` + n + `}`},
		{path: "/payments", body: `{"ORDER_ID":` + n + `}`, refused: true},                   // encoding/json would match names case-insensitively
		{path: "/payments", body: `{"order_id":999999,"order_id":` + n + `}`, refused: true}, // and take the last of two
		{path: "/payments", body: `{"order_id":` + n + `.0}`, refused: true},
		{path: "/payments", body: `{"order_id":` + n + `e0}`, refused: true},
		{path: "/payments", body: `{"order_id":"` + n + `"}`, refused: true},
	}
	var calls atomic.Int64
	inside, release := make(chan struct{}), make(chan struct{})
	a.server.authorize = func(ctx context.Context, _ Order) error {
		if calls.Add(1) == 1 {
			close(inside)
		}
		<-release
		return nil
	}

	client := ts.Client()
	results := make([]response, len(spellings))
	answered := make(chan int, len(spellings))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, sp := range spellings {
		wg.Go(func() {
			<-start
			results[i] = do(t, client, "POST", ts.URL+sp.path, sp.body)
			answered <- i
		})
	}
	close(start)
	// The holder waits in the provider until every other request answered:
	// none of them can have found the lock free. Spellings that took locks
	// of their own would wait in the provider too: give up on them after a
	// while, and let the counts below say so.
	<-inside
	timeout := time.After(10 * time.Second)
wait:
	for range len(spellings) - 1 {
		select {
		case <-answered:
		case <-timeout:
			t.Errorf("got %d provider calls and requests still waiting after 10s, want every spelling but one answered", calls.Load())
			break wait
		}
	}
	rdb := a.backend.nodes[0]
	locks, err := rdb.Keys(context.Background(), "padlock:{order:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()

	if want := []string{"padlock:{order:" + n + "}"}; !slices.Equal(locks, want) {
		t.Errorf("got locks %q held while the spellings ran, want only %q", locks, want)
	}
	var charged, busy int
	for i, r := range results {
		sp := spellings[i]
		switch {
		case sp.refused:
			checkProblem(t, r, http.StatusBadRequest)
		case r.status == http.StatusOK && r.body["charge"] != nil:
			charged++
		case r.status == http.StatusConflict:
			checkProblem(t, r, http.StatusConflict)
			busy++
		default:
			t.Errorf("%s %s: got %d %s, want 200 with a charge or 409", sp.path, sp.body, r.status, r.raw)
		}
	}
	charges, err := a.store.charges(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls.Load(); got != 1 || charged != 1 || len(charges) != 1 {
		t.Fatalf("got %d provider calls, %d charging answers and %d charges, want 1 of each", got, charged, len(charges))
	}
	t.Logf("%d spellings: 1 charged, %d busy (409), %d refused (400)", len(spellings), busy, len(spellings)-1-busy)
}

// A request that does not bind is refused before the lock, as the handler
// would refuse it: the fields at fault and the rule each broke, or what
// was expected.
// Regression: id 0 was refused as "required" although it was sent, and an
// integer too large for an id as "type" integer.
func TestPayNotBound(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	tests := []struct {
		path, body  string
		status      int
		field, rule string
	}{
		{"/orders/abc/pay", "", http.StatusBadRequest, "", ""},
		{"/orders/0/pay", "", http.StatusBadRequest, "id", "gt"},
		{"/orders/-3/pay", "", http.StatusBadRequest, "id", "gt"},
		{"/orders/99999999999999999999/pay", "", http.StatusBadRequest, "id", "max"},
		{"/orders/-99999999999999999999/pay", "", http.StatusBadRequest, "id", "min"},
		{"/orders/1.5/pay", "", http.StatusBadRequest, "id", "type"},
		{"/payments", `{}`, http.StatusBadRequest, "order_id", "required"},
		{"/payments", `{"order_id":0}`, http.StatusBadRequest, "order_id", "gt"},
		{"/payments", `{"order_id":-1}`, http.StatusBadRequest, "order_id", "gt"},
		{"/payments", `{"order_id":99999999999999999999}`, http.StatusBadRequest, "order_id", "max"},
		{"/payments", `{"order_id":1.5}`, http.StatusBadRequest, "order_id", "type"},
		{"/payments", `{"order_id":`, http.StatusBadRequest, "", ""},
		{"/payments", `{"order_id":1,"pad":"` + strings.Repeat("x", maxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+tt.body[:min(len(tt.body), 20)], func(t *testing.T) {
			r := do(t, ts.Client(), "POST", ts.URL+tt.path, tt.body)
			checkProblem(t, r, tt.status)
			if tt.field == "" {
				return
			}
			errs, _ := r.body["errors"].([]any)
			if len(errs) != 1 || errs[0].(map[string]any)["field"] != tt.field || errs[0].(map[string]any)["rule"] != tt.rule {
				t.Fatalf("got errors %v, want one naming %s and rule %q", r.body["errors"], tt.field, tt.rule)
			}
		})
	}
}
