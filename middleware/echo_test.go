package middleware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// A key built from a secret header appears neither in a busy or
// unavailable answer nor in the errors Lock adds to the Gin context.
func TestLockDoesNotEchoKey(t *testing.T) {
	const secret = "sk_live_9f8e7d6c5b4a"
	for _, kill := range []bool{false, true} {
		l, srv, _ := newLocker(t)
		var logged []string
		r := gin.New()
		r.Use(func(c *gin.Context) {
			c.Next()
			logged = append(logged, c.Errors.String())
		})
		r.POST("/reports", middleware.Lock(l, keyfunc.Header("X-Api-Key", lockkey.Text())), func(c *gin.Context) { c.Status(http.StatusOK) })
		want := http.StatusConflict
		if kill {
			srv.Kill(t)
			want = http.StatusServiceUnavailable
		} else {
			lk, err := l.Acquire(context.Background(), "/reports:"+secret, padlock.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Release(context.Background())
		}
		req := httptest.NewRequest("POST", "/reports", nil)
		req.Header.Set("X-Api-Key", secret)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		checkProblem(t, w, want)
		seen := w.Body.String() + strings.Join(logged, "\n")
		for k, v := range w.Header() {
			seen += k + ": " + strings.Join(v, ",") + "\n"
		}
		if strings.Contains(seen, secret) {
			t.Fatalf("status %d: got the key in the answer or the errors: %s", want, seen)
		}
		if kill && !strings.Contains(seen, "unavailable") {
			t.Fatalf("got errors %q, want the unavailable error logged", logged)
		}
	}
}
