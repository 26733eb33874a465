package keyfunc_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/go-playground/validator/v10"

	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
)

// Every spelling gin's binding reads as order 13 gives one key, or is
// refused, through a path parameter, a query value and a template alike.
func TestSpellingsOneKey(t *testing.T) {
	spellings := []string{"13", "013", "+13", "%2013", "13%0A", "%2B13", "0013"}
	tests := []struct {
		name   string
		f      keyfunc.Func
		strict bool
		route  string
		target func(s string) string
	}{
		{"param", keyfunc.Param("id", lockkey.Int(64)), false, "/o/:id", func(s string) string { return "/o/" + s }},
		{"param strict", keyfunc.Param("id", lockkey.Int(64).Strict()), true, "/o/:id", func(s string) string { return "/o/" + s }},
		{"query", keyfunc.Query("id", lockkey.Int(64)), false, "/", func(s string) string { return "/?id=" + s }},
		{"template", keyfunc.MustTemplate("{param.id|int64}"), false, "/o/:id", func(s string) string { return "/o/" + s }},
		{"template strict", keyfunc.MustTemplate("{param.id|int64|strict}"), true, "/o/:id", func(s string) string { return "/o/" + s }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range spellings {
				got := run(t, tt.f, tt.route, newRequest("POST", tt.target(s), "", ""))
				if tt.strict && s != "13" {
					checkResult(t, got, "", lockkey.ErrInvalidPart, `"`)
					continue
				}
				checkResult(t, got, "13", nil, "")
			}
		})
	}
}

type payBody struct {
	OrderID int64   `json:"order_id" binding:"required,gt=0"`
	Amount  float64 `json:"amount" binding:"required,gt=0"`
}

func payParts(p *payBody) []string {
	return []string{strconv.FormatInt(p.OrderID, 10), strconv.FormatFloat(p.Amount, 'g', -1, 64)}
}

// Bind builds the key from what encoding/json binds: integers exactly,
// floats as the float64 they are.
func TestBindJSON(t *testing.T) {
	key := keyfunc.Bind((*gin.Context).ShouldBindBodyWithJSON, payParts)
	tests := []struct {
		body    string
		want    string
		wantErr error
	}{
		{`{"order_id":9007199254740992,"amount":0.1}`, "9007199254740992:0.1", nil},
		{`{"order_id":9007199254740993,"amount":0.1000000000000000055511151231257827}`, "9007199254740993:0.1", nil},
		{`{"order_id":13,"amount":1e-1}`, "13:0.1", nil},
		{`{"order_id":13.0,"amount":1}`, "", lockkey.ErrInvalidPart},
		{`{"order_id":0,"amount":1}`, "", lockkey.ErrInvalidPart},
		{`{"order_id":`, "", lockkey.ErrInvalidPart},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			var bound *payBody
			got := run(t, key, "/", newRequest("POST", "/", "application/json", tt.body), func(c *gin.Context) {
				bound = keyfunc.Bound[payBody](c)
			})
			checkResult(t, got, tt.want, tt.wantErr, "")
			if tt.wantErr == nil && (bound == nil || strings.Join(payParts(bound), ":") != tt.want) {
				t.Fatalf("got bound %+v, want the value the key %q names", bound, tt.want)
			}
			if tt.wantErr != nil && bound != nil {
				t.Fatalf("got bound %+v for a request that did not bind, want none", bound)
			}
		})
	}
}

// A validation failure keeps the validator's errors for a responder that
// lists the fields, and a body over a MaxBytesReader limit is 413.
func TestBindErrors(t *testing.T) {
	key := keyfunc.Bind((*gin.Context).ShouldBindJSON, payParts)
	got := run(t, key, "/", newRequest("POST", "/", "application/json", `{"order_id":-1,"amount":1}`))
	var verrs validator.ValidationErrors
	if !errors.Is(got.err, lockkey.ErrInvalidPart) || !errors.As(got.err, &verrs) || verrs[0].Field() != "OrderID" {
		t.Fatalf("got %v, want ErrInvalidPart wrapping the validation error on OrderID", got.err)
	}

	req := newRequest("POST", "/", "application/json", `{"order_id":1,"amount":1,"pad":"`+strings.Repeat("x", 100)+`"}`)
	got = run(t, func(c *gin.Context) (string, error) {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, 16)
		return key(c)
	}, "/", req)
	checkResult(t, got, "", lockkey.ErrBodyTooLarge, "limit 16 bytes")

	var none *payBody
	run(t, keyfunc.Const("x"), "/", newRequest("GET", "/", "", ""), func(c *gin.Context) { none = keyfunc.Bound[payBody](c) })
	if none != nil {
		t.Fatalf("got Bound %+v on a route without Bind, want nil", none)
	}
}

func TestTemplateKinds(t *testing.T) {
	tests := []struct {
		tmpl, target, want string
		wantErr            error
	}{
		{"{param.id|uuid}", "/o/6BA7B810-9DAD-11D1-80B4-00C04FD430C8", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", nil},
		{"{param.id|uint8}", "/o/0255", "255", nil},
		{"{param.id|uint8}", "/o/256", "", lockkey.ErrInvalidPart},
		{"{param.id|float32}", "/o/0.10000000149011612", "0.1", nil},
		{"{param.id|text}", "/o/cafe%CC%81", "caf\u00e9", nil},
		{"{param.id|text|strict}", "/o/cafe%CC%81", "", lockkey.ErrInvalidPart},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl+" "+tt.target, func(t *testing.T) {
			got := run(t, keyfunc.MustTemplate(tt.tmpl), "/o/:id", newRequest("GET", tt.target, "", ""))
			checkResult(t, got, tt.want, tt.wantErr, "")
		})
	}
	for _, bad := range []string{"{param.id|int7}", "{param.id|int|lax}", "{route|int}"} {
		if _, err := keyfunc.Template(bad); err == nil {
			t.Errorf("Template(%q): got no error, want one", bad)
		}
	}
}
