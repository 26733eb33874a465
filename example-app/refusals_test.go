package main

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// goNames are what a refusal must not show the client: Go's names for
// types and structs, which say nothing to a client and something to an
// attacker.
var goNames = []string{"int64", "float64", "Go struct", "Go value", "createOrderRequest", "orderURI", "jobQuery", "strconv", "json:"}

// checkNoGoNames fails t if r's body names Go types.
func checkNoGoNames(t testing.TB, r response) {
	t.Helper()
	for _, n := range goNames {
		if strings.Contains(r.raw, n) {
			t.Fatalf("got %s, want no Go names (%q) in a refusal", r.raw, n)
		}
	}
}

// checkFieldError fails t unless r's problem lists field breaking rule.
func checkFieldError(t testing.TB, r response, field, rule string) {
	t.Helper()
	errs, _ := r.body["errors"].([]any)
	for _, e := range errs {
		if e := e.(map[string]any); e["field"] == field && e["rule"] == rule {
			return
		}
	}
	t.Fatalf("got %s, want an error naming field %s breaking %s", r.raw, field, rule)
}

// Every refusal is problem+json whose detail says what is wrong with the
// part of the request at fault: the path, the query or the body, never
// "not valid JSON" for a path, and never a Go type name.
func TestRefusalsAreProblems(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	big := strings.Repeat("x", maxHeaderBytes)
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		status                   int
		detail                   string // a part of the detail
		field, rule              string // a field error, if any
		location                 string
	}{
		{name: "order id not a number", method: "GET", path: "/orders/abc", status: 400, detail: "the request path is invalid", field: "id", rule: "type"},
		{name: "pay id not a number", method: "POST", path: "/orders/abc/pay", status: 400, detail: "the request path is invalid", field: "id", rule: "type"},
		{name: "seconds not a number", method: "POST", path: "/jobs/nightly-report/run?seconds=abc", header: http.Header{"Authorization": {"Bearer " + testOperatorKey}}, status: 400, detail: "the request query is invalid", field: "seconds", rule: "type"},
		{name: "amount of the wrong type", method: "POST", path: "/orders", body: `{"customer":"a","amount_cents":"12","currency":"EUR"}`,
			header: jsonHeader, status: 400, detail: "the request is invalid", field: "amount_cents", rule: "type"},
		{name: "order id of the wrong type", method: "POST", path: "/payments", body: `{"order_id":true}`,
			header: jsonHeader, status: 400, detail: "the request is invalid", field: "order_id", rule: "type"},
		{name: "not an object", method: "POST", path: "/orders", body: `[1,2]`, header: jsonHeader, status: 400, detail: "must be a JSON object"},
		{name: "no route", method: "GET", path: "/nope", status: 404, detail: "no such route"},
		{name: "wrong method", method: "DELETE", path: "/orders", status: 405, detail: "method not allowed"},
		{name: "GET with a trailing slash", method: "GET", path: "/healthz/?x=1", status: 301, detail: "this route is /healthz?x=1", location: "/healthz?x=1"},
		{name: "POST with a trailing slash", method: "POST", path: "/orders/", body: `{}`, header: jsonHeader, status: 308, detail: "this route is /orders", location: "/orders"},
		{name: "POST /payments/", method: "POST", path: "/payments/", status: 308, location: "/payments"},
		{name: "no open redirect", method: "GET", path: "//example.com/", status: 404},
		{name: "header fields too large", method: "GET", path: "/healthz", header: http.Header{"X-Big": {big}}, status: 431, detail: "header fields"},
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := doHeader(t, noRedirect, tt.method, ts.URL+tt.path, tt.body, tt.header)
			checkProblem(t, r, tt.status)
			checkNoGoNames(t, r)
			if d, _ := r.body["detail"].(string); !strings.Contains(d, tt.detail) || strings.Contains(d, "JSON") && tt.method == "GET" {
				t.Fatalf("got detail %q, want it to say %q", d, tt.detail)
			}
			if tt.field != "" {
				checkFieldError(t, r, tt.field, tt.rule)
			}
			if got := r.header.Get("Location"); got != tt.location {
				t.Fatalf("got Location %q, want %q", got, tt.location)
			}
		})
	}
}

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// Bodies are read strictly: one JSON object, sent as JSON, naming only the
// fields the route takes, with names a person could have typed. Each
// refusal names what broke.
func TestStrictJSON(t *testing.T) {
	_, ts := startApp(t, testConfig(t))
	const valid = `{"customer":"alice","amount_cents":1299,"currency":"EUR"}`
	tests := []struct {
		name, path, body string
		header           http.Header
		status           int
		detail           string
		field, rule      string
	}{
		{"unknown field", "/orders", `{"customer":"a","amount_cents":1,"currency":"EUR","ammount":5}`, jsonHeader, 400, "invalid", "ammount", "unknown"},
		{"trailing data", "/orders", valid + ` x`, jsonHeader, 400, "nothing after it", "", ""},
		{"a second object", "/orders", valid + valid, jsonHeader, 400, "nothing after it", "", ""},
		{"empty body", "/orders", "", jsonHeader, 400, "empty", "", ""},
		{"text/plain", "/orders", valid, http.Header{"Content-Type": {"text/plain"}}, 415, "application/json", "", ""},
		{"no Content-Type", "/orders", valid, nil, 415, "application/json", "", ""},
		{"form", "/orders", valid, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, 415, "application/json", "", ""},
		{"latin-1", "/orders", valid, http.Header{"Content-Type": {"application/json; charset=latin1"}}, 415, "application/json", "", ""},
		{"blank name", "/orders", `{"customer":"   ","amount_cents":1,"currency":"EUR"}`, jsonHeader, 400, "invalid", "customer", "notblank"},
		{"newline in name", "/orders", `{"customer":"alice\nlevel=ERROR","amount_cents":1,"currency":"EUR"}`, jsonHeader, 400, "invalid", "customer", "printable"},
		{"bidi override in name", "/orders", `{"customer":"\u202eecila","amount_cents":1,"currency":"EUR"}`, jsonHeader, 400, "invalid", "customer", "printable"},
		{"NUL in name", "/orders", `{"customer":"a\u0000","amount_cents":1,"currency":"EUR"}`, jsonHeader, 400, "invalid", "customer", "printable"},
		{"zero amount", "/orders", `{"customer":"a","amount_cents":0,"currency":"EUR"}`, jsonHeader, 400, "invalid", "amount_cents", "gt"},
		// encoding/json keeps the last of two members and binds names in any
		// case: this body was stored as XXX and 6 cents.
		{"duplicate and case-folded fields", "/orders", `{"customer":"a","currency":"EUR","currency":"XXX","AMOUNT_CENTS":6}`, jsonHeader, 400, "invalid", "currency", "duplicate"},
		{"case-folded field", "/orders", `{"customer":"a","currency":"EUR","AMOUNT_CENTS":6}`, jsonHeader, 400, "invalid", "AMOUNT_CENTS", "case"},
		{"payments: duplicate", "/payments", `{"order_id":1,"order_id":2}`, jsonHeader, 400, "invalid", "order_id", "duplicate"},
		{"duplicate, valid both times", "/orders", `{"customer":"a","amount_cents":5,"amount_cents":5,"currency":"EUR"}`, jsonHeader, 400, "invalid", "amount_cents", "duplicate"},
		{"payments: case-folded", "/payments", `{"Order_Id":1}`, jsonHeader, 400, "invalid", "Order_Id", "case"},
		{"payments: unknown field", "/payments", `{"order_id":1,"amount":5}`, jsonHeader, 400, "invalid", "amount", "unknown"},
		{"payments: a second object", "/payments", `{"order_id":1}{"order_id":2}`, jsonHeader, 400, "nothing after it", "", ""},
		{"payments: text/plain", "/payments", `{"order_id":1}`, http.Header{"Content-Type": {"text/plain"}}, 415, "application/json", "", ""},
		{"charset utf-8 is JSON", "/orders", valid, http.Header{"Content-Type": {"application/json; charset=UTF-8"}}, 201, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := doHeader(t, ts.Client(), "POST", ts.URL+tt.path, tt.body, tt.header)
			if tt.status == http.StatusCreated {
				if r.status != tt.status {
					t.Fatalf("got %d %s, want %d", r.status, r.raw, tt.status)
				}
				return
			}
			checkProblem(t, r, tt.status)
			checkNoGoNames(t, r)
			if d, _ := r.body["detail"].(string); !strings.Contains(d, tt.detail) {
				t.Fatalf("got detail %q, want it to say %q", d, tt.detail)
			}
			if tt.field != "" {
				checkFieldError(t, r, tt.field, tt.rule)
			}
		})
	}
}

// A body two readers read differently is refused, naming each member at
// fault: encoding/json alone keeps the last of two "currency" members and
// binds "AMOUNT_CENTS" to amount_cents, so this body was stored as an
// order of 6 XXX, where a proxy or an audit log that takes the first
// member, or names as spelled, saw EUR and no amount. Nothing is stored.
func TestStrictJSONAmbiguousMembers(t *testing.T) {
	a, ts := startApp(t, testConfig(t))
	r := do(t, ts.Client(), "POST", ts.URL+"/orders", `{"customer":"alice","currency":"EUR","currency":"XXX","AMOUNT_CENTS":6}`)
	checkProblem(t, r, http.StatusBadRequest)
	checkNoGoNames(t, r)
	checkFieldError(t, r, "currency", "duplicate")
	checkFieldError(t, r, "AMOUNT_CENTS", "case")
	if errs, _ := r.body["errors"].([]any); len(errs) != 2 || errs[1].(map[string]any)["param"] != "amount_cents" {
		t.Fatalf("got errors %v, want the two, the second naming amount_cents", r.body["errors"])
	}
	var n int
	if err := a.store.db.QueryRow(`SELECT count(*) FROM orders`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("got %d orders stored (%v), want none", n, err)
	}
	// Nested objects and arrays are walked too; other members stay free.
	for _, tc := range []struct {
		body   string
		errors int
	}{
		{`{"customer":"alice","amount_cents":6,"currency":"EUR"}`, 0},
		{`{"customer":"alice","amount_cents":6,"currency":"EUR","customer":"bob"}`, 1},
	} {
		got := checkMembers([]byte(tc.body), reflect.TypeOf(&createOrderRequest{}))
		if len(got) != tc.errors {
			t.Errorf("%s: got %v, want %d errors", tc.body, got, tc.errors)
		}
	}
	type inner struct {
		ID int64 `json:"id"`
	}
	type outer struct {
		Items []inner          `json:"items"`
		Meta  map[string]inner `json:"meta"`
	}
	got := checkMembers([]byte(`{"items":[{"id":1},{"id":2,"ID":3}],"meta":{"a":{"Id":1},"a":{}}}`), reflect.TypeOf(&outer{}))
	want := []fieldError{{Field: "items.ID", Rule: "case", Param: "id"}, {Field: "meta.a.Id", Rule: "case", Param: "id"}, {Field: "meta.a", Rule: "duplicate"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("nested: got %v, want %v", got, want)
	}
}
