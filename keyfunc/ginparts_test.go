package keyfunc_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
)

type userID string

func (u userID) String() string { return "user-" + string(u) }

func TestParts(t *testing.T) {
	withHeader := func(req *http.Request, kv ...string) *http.Request {
		for i := 0; i < len(kv); i += 2 {
			req.Header.Add(kv[i], kv[i+1])
		}
		return req
	}
	setUser := func(v any) gin.HandlerFunc {
		return func(c *gin.Context) { c.Set("user", v) }
	}
	tests := []struct {
		name    string
		f       keyfunc.Func
		route   string
		req     *http.Request
		before  gin.HandlerFunc
		want    string
		wantErr error
		wantMsg string // substring of the error text
	}{
		{name: "param", f: keyfunc.Param("id", lockkey.Text()), route: "/orders/:id", req: newRequest("GET", "/orders/42", "", ""), want: "42"},
		{name: "param escaped", f: keyfunc.Param("id", lockkey.Text()), route: "/orders/:id", req: newRequest("GET", "/orders/1:pay%7Bx%7D", "", ""), want: "1%3Apay%7Bx%7D"},
		{name: "param missing", f: keyfunc.Param("oid", lockkey.Text()), route: "/orders/:id", req: newRequest("GET", "/orders/42", "", ""), wantErr: lockkey.ErrMissingPart, wantMsg: `"path param oid"`},
		{name: "catch-all param", f: keyfunc.Param("path", lockkey.Text()), route: "/files/*path", req: newRequest("GET", "/files/a/b", "", ""), want: "/a/b"},
		{name: "query", f: keyfunc.Query("id", lockkey.Text()), route: "/", req: newRequest("GET", "/?id=7", "", ""), want: "7"},
		{name: "query missing", f: keyfunc.Query("id", lockkey.Text()), route: "/", req: newRequest("GET", "/?x=7", "", ""), wantErr: lockkey.ErrMissingPart, wantMsg: `"query id"`},
		{name: "query empty", f: keyfunc.Query("id", lockkey.Text()), route: "/", req: newRequest("GET", "/?id=", "", ""), wantErr: lockkey.ErrMissingPart},
		{name: "query repeated", f: keyfunc.Query("id", lockkey.Text()), route: "/", req: newRequest("GET", "/?id=1&id=2", "", ""), wantErr: lockkey.ErrAmbiguousPart, wantMsg: `"query id" (2 values)`},
		{name: "header", f: keyfunc.Header("x-tenant", lockkey.Text()), route: "/", req: withHeader(newRequest("GET", "/", "", ""), "X-Tenant", "acme"), want: "acme"},
		{name: "header missing", f: keyfunc.Header("X-Tenant", lockkey.Text()), route: "/", req: newRequest("GET", "/", "", ""), wantErr: lockkey.ErrMissingPart, wantMsg: `"header X-Tenant"`},
		{name: "header twice", f: keyfunc.Header("X-Tenant", lockkey.Text()), route: "/", req: withHeader(newRequest("GET", "/", "", ""), "X-Tenant", "a", "X-Tenant", "b"), wantErr: lockkey.ErrAmbiguousPart},
		{name: "form", f: keyfunc.Form("id", lockkey.Text()), route: "/", req: newRequest("POST", "/?id=q", "application/x-www-form-urlencoded", "id=f%3A1"), want: "f%3A1"},
		{name: "form ignores query", f: keyfunc.Form("id", lockkey.Text()), route: "/", req: newRequest("POST", "/?id=q", "application/x-www-form-urlencoded", "x=1"), wantErr: lockkey.ErrMissingPart, wantMsg: `"form field id"`},
		{name: "form too large", f: keyfunc.Form("id", lockkey.Text(), lockkey.WithMaxBodyBytes(4)), route: "/", req: newRequest("POST", "/", "application/x-www-form-urlencoded", "id=12345"), wantErr: lockkey.ErrBodyTooLarge},
		{name: "form malformed", f: keyfunc.Form("id", lockkey.Text()), route: "/", req: newRequest("POST", "/", "application/x-www-form-urlencoded", "id=%zz"), wantErr: lockkey.ErrMalformedBody},
		{name: "route", f: keyfunc.Route(), route: "/orders/:id/pay", req: newRequest("POST", "/orders/1/pay", "", ""), want: "/orders/$id/pay"},
		{name: "client ip", f: keyfunc.ClientIP(), route: "/", req: newRequest("GET", "/", "", ""), want: "192.0.2.1"},
		{name: "value string", f: keyfunc.Value("user"), route: "/", req: newRequest("GET", "/", "", ""), before: setUser("bob"), want: "bob"},
		{name: "value int64", f: keyfunc.Value("user"), route: "/", req: newRequest("GET", "/", "", ""), before: setUser(int64(-9)), want: "-9"},
		{name: "value stringer", f: keyfunc.Value("user"), route: "/", req: newRequest("GET", "/", "", ""), before: setUser(userID("7")), want: "user-7"},
		{name: "value missing", f: keyfunc.Value("user"), route: "/", req: newRequest("GET", "/", "", ""), wantErr: lockkey.ErrMissingPart, wantMsg: `"context value user"`},
		{name: "value nil", f: keyfunc.Value("user"), route: "/", req: newRequest("GET", "/", "", ""), before: setUser(nil), wantErr: lockkey.ErrMissingPart},
		{name: "const", f: keyfunc.Const("order#1"), route: "/", req: newRequest("GET", "/", "", ""), want: "order%231"},
		{name: "custom", f: keyfunc.Custom("tenant", lockkey.Text(), func(*gin.Context) (string, error) { return "a:b", nil }), route: "/", req: newRequest("GET", "/", "", ""), want: "a%3Ab"},
		{name: "custom empty", f: keyfunc.Custom("tenant", lockkey.Text(), func(*gin.Context) (string, error) { return "", nil }), route: "/", req: newRequest("GET", "/", "", ""), wantErr: lockkey.ErrMissingPart, wantMsg: `"tenant"`},
		{name: "join", f: keyfunc.Join(keyfunc.Const("order"), keyfunc.Param("id", lockkey.Text()), keyfunc.Query("step", lockkey.Text())), route: "/o/:id", req: newRequest("GET", "/o/1:pay?step=2", "", ""), want: "order:1%3Apay:2"},
		{name: "join stops at first error", f: keyfunc.Join(keyfunc.Const("order"), keyfunc.Query("a", lockkey.Text()), keyfunc.Query("b", lockkey.Text())), route: "/", req: newRequest("GET", "/?b=1", "", ""), wantErr: lockkey.ErrMissingPart, wantMsg: `"query a"`},
		{name: "join of raw empty func", f: keyfunc.Join(keyfunc.Const("a"), func(*gin.Context) (string, error) { return "", nil }), route: "/", req: newRequest("GET", "/", "", ""), wantErr: lockkey.ErrMissingPart, wantMsg: `"part 2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f
			if tt.before != nil {
				f = func(c *gin.Context) (string, error) { tt.before(c); return tt.f(c) }
			}
			got := run(t, f, tt.route, tt.req)
			checkResult(t, got, tt.want, tt.wantErr, tt.wantMsg)
		})
	}
}

func checkResult(t *testing.T, got result, want string, wantErr error, wantMsg string) {
	t.Helper()
	if wantErr != nil {
		if !errors.Is(got.err, wantErr) {
			t.Fatalf("got key %q, error %v, want error %v", got.key, got.err, wantErr)
		}
		if !strings.Contains(got.err.Error(), wantMsg) {
			t.Fatalf("got error %q, want it to contain %q", got.err, wantMsg)
		}
		return
	}
	if got.err != nil {
		t.Fatalf("got error %v, want key %q", got.err, want)
	}
	if got.key != want {
		t.Fatalf("got key %q, want %q", got.key, want)
	}
}

func TestConstructorsPanic(t *testing.T) {
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"Param", func() { keyfunc.Param("", lockkey.Text()) }, "keyfunc: Param: empty name"},
		{"Query", func() { keyfunc.Query("", lockkey.Text()) }, "keyfunc: Query: empty name"},
		{"Header", func() { keyfunc.Header("", lockkey.Text()) }, "keyfunc: Header: empty name"},
		{"Form", func() { keyfunc.Form("", lockkey.Text()) }, "keyfunc: Form: empty name"},
		{"Const", func() { keyfunc.Const("") }, "keyfunc: Const: empty string"},
		{"Value", func() { keyfunc.Value("") }, "keyfunc: Value: empty key"},
		{"Custom", func() { keyfunc.Custom("x", lockkey.Text(), nil) }, "keyfunc: Custom: nil fn"},
		{"Join empty", func() { keyfunc.Join() }, "keyfunc: Join: no parts"},
		{"Join nil", func() { keyfunc.Join(keyfunc.Route(), nil) }, "keyfunc: Join: part 2 is nil"},
		{"JSON path", func() { keyfunc.JSON("a..b", lockkey.Text()) }, `keyfunc: JSON: path "a..b" has an empty segment`},
		{"WithMaxBodyBytes", func() { keyfunc.JSON("a", lockkey.Text(), lockkey.WithMaxBodyBytes(0)) }, "keyfunc: JSON: WithMaxBodyBytes: 0, want > 0"},
		{"Bind nil", func() { keyfunc.Bind[struct{}](nil, func(*struct{}) []string { return nil }) }, "keyfunc: Bind: nil bind"},
		{"MustTemplate", func() { keyfunc.MustTemplate("{nope}") }, `keyfunc: template "{nope}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				got, _ := recover().(string)
				if !strings.HasPrefix(got, tt.want) {
					t.Fatalf("got panic %q, want %q", got, tt.want)
				}
			}()
			tt.f()
		})
	}
}
