package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/internal/handlertest"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// callerKey is where the tests' authentication step puts the caller.
type callerKey struct{}

// TestLockNamesCaller checks who a Gin request's lock or permit names as
// its holder: the Locker's Owner, the route template (c.FullPath()), and
// the caller WithCaller reads from the gin.Context, as a keyed hash only.
func TestLockNamesCaller(t *testing.T) {
	l, sem, redactor, _ := handlertest.NamedLocker(t)
	const secret = "alice@example.com"
	caller := middleware.WithCaller(func(c *gin.Context) string {
		v, _ := c.Get(callerKey{})
		s, _ := v.(string)
		return s
	})
	// The Caller that ginidem.New takes too.
	var id middleware.Caller = func(c *gin.Context) (string, error) {
		v, _ := c.Get(callerKey{})
		s, _ := v.(string)
		return s, nil
	}
	failing := middleware.WithCallerFrom(func(*gin.Context) (string, error) { return "", errors.New("no session store") })
	key := keyfunc.Param("id", lockkey.Int(64))
	route := handlertest.Owner + " route=/orders/$id/pay"
	for _, tc := range []struct {
		name    string
		mw      gin.HandlerFunc
		acquire func(ctx context.Context, key string, o padlock.Options) (*padlock.Lock, error)
		want    string
	}{
		{"Lock, no caller", middleware.Lock(l, key), l.Acquire, route},
		{"Lock", middleware.Lock(l, key, caller, httplock.WithRedactor(redactor)), l.Acquire, route + " caller=#" + redactor.Hash(secret)},
		{"Limit", middleware.Limit(sem, key, http.StatusTooManyRequests, caller, httplock.WithRedactor(redactor)), sem.Acquire,
			route + " caller=#" + redactor.Hash(secret)},
		{"Lock, WithCallerFrom", middleware.Lock(l, key, middleware.WithCallerFrom(id), httplock.WithRedactor(redactor)), l.Acquire,
			route + " caller=#" + redactor.Hash(secret)},
		{"Limit, WithCallerFrom", middleware.Limit(sem, key, http.StatusTooManyRequests, middleware.WithCallerFrom(id), httplock.WithRedactor(redactor)), sem.Acquire,
			route + " caller=#" + redactor.Hash(secret)},
		{"Lock, a Caller that fails", middleware.Lock(l, key, failing, httplock.WithRedactor(redactor)), l.Acquire, route},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held, refused string
			r := gin.New()
			r.POST("/orders/:id/pay", func(c *gin.Context) { c.Set(callerKey{}, secret) }, tc.mw, func(c *gin.Context) {
				key := middleware.LockFrom(c).Key()
				for _, x := range l.Held() {
					if x.Key == key {
						held = x.Owner
					}
				}
				_, err := tc.acquire(context.Background(), key, padlock.Options{})
				if na := (*padlock.NotAcquiredError)(nil); errors.As(err, &na) {
					refused = na.Holder
				}
				c.Status(http.StatusNoContent)
			})
			if w := serve(r, "POST", "/orders/42/pay", ""); w.Code != http.StatusNoContent {
				t.Fatalf("got status %d (%s), want 204", w.Code, w.Body)
			}
			if held != tc.want || refused != tc.want {
				t.Errorf("holder: got Held %q, refused acquire's Holder %q; want %q", held, refused, tc.want)
			}
			if strings.Contains(held+refused, "alice") {
				t.Errorf("holder %q shows the caller as it is", held)
			}
		})
	}
}

// WithCaller(nil) panics when the middleware is built, naming the option.
func TestWithCallerNil(t *testing.T) {
	l, _, _ := newLocker(t)
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "WithCaller") {
			t.Errorf("got panic %v, want one naming WithCaller", v)
		}
	}()
	middleware.Lock(l, keyfunc.Param("id", lockkey.Int(64)), middleware.WithCaller(nil))
}

// WithCallerFrom(nil) panics, naming the option.
func TestWithCallerFromNil(t *testing.T) {
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "WithCallerFrom") {
			t.Errorf("got panic %v, want one naming WithCallerFrom", v)
		}
	}()
	middleware.WithCallerFrom(nil)
}
