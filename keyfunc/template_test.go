package keyfunc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
)

func TestTemplate(t *testing.T) {
	tests := []struct {
		tmpl    string
		want    string
		wantErr error
	}{
		{tmpl: "order:{param.id}", want: "order:1%3Ax"},
		{tmpl: "order:{param.id}:{header.X-Tenant}", want: "order:1%3Ax:acme"},
		{tmpl: "v1-{param.id}-x:{query.step}", want: "v1-1%3Ax-x:2"},
		{tmpl: "{json.order.id}:{ctx.user}", want: "o9:bob"},
		{tmpl: "{route}:{ip}", want: "/orders/$id:192.0.2.1"},
		{tmpl: "nightly-report", want: "nightly-report"},
		{tmpl: "order:{query.missing}", wantErr: lockkey.ErrMissingPart},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			f, err := keyfunc.Template(tt.tmpl)
			if err != nil {
				t.Fatalf("Template: %v", err)
			}
			req := newRequest("POST", "/orders/1:x?step=2", "application/json", `{"order":{"id":"o9"}}`)
			req.Header.Set("X-Tenant", "acme")
			got := run(t, func(c *gin.Context) (string, error) { c.Set("user", "bob"); return f(c) }, "/orders/:id", req)
			checkResult(t, got, tt.want, tt.wantErr, "")
		})
	}
}

func TestTemplateSameAsJoin(t *testing.T) {
	req := func() *gin.Context {
		return &gin.Context{Params: gin.Params{{Key: "id", Value: "a:b{c}"}}}
	}
	got, err1 := keyfunc.MustTemplate("order:{param.id}")(req())
	want, err2 := keyfunc.Join(keyfunc.Const("order"), keyfunc.Param("id", lockkey.Text()))(req())
	if err1 != nil || err2 != nil || got != want {
		t.Fatalf("got %q (%v), want %q (%v)", got, err1, want, err2)
	}
}

func TestTemplateErrors(t *testing.T) {
	tests := []struct{ tmpl, want string }{
		{"", "empty"},
		{"order:{param.id", "unclosed '{' at offset 6"},
		{"order}", "'}' without '{'"},
		{"{param.a}{param.b}", "two placeholders in one segment"},
		{"x{param.a}-{param.b}", "two placeholders in one segment"},
		{"{cookie.a}", `unknown part "cookie"`},
		{"{param}", "{param} needs a name"},
		{"{route.x}", "{route} takes no name"},
		{"{json.a..b}", `json path "a..b" has an empty segment`},
		{"100%:{param.id}", `fixed text may not contain '%'`},
		{"a#b", `fixed text may not contain '#'`},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			_, err := keyfunc.Template(tt.tmpl)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "keyfunc: template ") {
				t.Fatalf("got error %v, want one containing %q", err, tt.want)
			}
			if errors.Is(err, lockkey.ErrMissingPart) {
				t.Fatalf("got %v, want a configuration error, not a request error", err)
			}
		})
	}
}
