package keyfunc_test

import (
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/keyfunc"
)

// X-Forwarded-For decides ClientIP only when the peer is a trusted proxy:
// gin trusts every peer by default, so a client can pick another client's
// key; with SetTrustedProxies(nil) the header is ignored.
func TestClientIPTrustedProxies(t *testing.T) {
	tests := []struct {
		name    string
		trusted []string // nil: trust no proxy; "default": gin's default
		peer    string
		want    string
	}{
		{"gin default trusts every peer", []string{"default"}, "192.0.2.1:1234", "203.0.113.9"},
		{"no trusted proxy", nil, "192.0.2.1:1234", "192.0.2.1"},
		{"peer is a trusted proxy", []string{"192.0.2.0/24"}, "192.0.2.1:1234", "203.0.113.9"},
		{"peer is not a trusted proxy", []string{"10.0.0.0/8"}, "192.0.2.1:1234", "192.0.2.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gin.New()
			if len(tt.trusted) != 1 || tt.trusted[0] != "default" {
				if err := r.SetTrustedProxies(tt.trusted); err != nil {
					t.Fatal(err)
				}
			}
			var got string
			f := keyfunc.ClientIP()
			r.GET("/", func(c *gin.Context) { got, _ = f(c) })
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = tt.peer
			req.Header.Set("X-Forwarded-For", "203.0.113.9")
			r.ServeHTTP(httptest.NewRecorder(), req)
			if got != tt.want {
				t.Fatalf("got key %q, want %q", got, tt.want)
			}
		})
	}
}
