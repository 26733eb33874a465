package keyfunc_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/keyfunc"
)

// result is what a Func returned inside a real gin handler.
type result struct {
	key string
	err error
}

// run serves req through a gin.New engine with route registered for all
// methods, evaluates f in the handler, then calls after (if any) with the
// same context, and returns what f returned.
func run(t *testing.T, f keyfunc.Func, route string, req *http.Request, after ...func(c *gin.Context)) result {
	t.Helper()
	var res result
	called := false
	r := gin.New()
	r.Any(route, func(c *gin.Context) {
		called = true
		res.key, res.err = f(c)
		for _, a := range after {
			a(c)
		}
	})
	r.ServeHTTP(httptest.NewRecorder(), req)
	if !called {
		t.Fatalf("route %q did not match %s %s", route, req.Method, req.URL)
	}
	return res
}

func newRequest(method, target, contentType, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}
