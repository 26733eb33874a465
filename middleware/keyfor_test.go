package middleware_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// KeyFor on a gin.Engine gives the key the handler's lock has when the
// request is served, and never runs the handler behind the lock.
func TestKeyFor(t *testing.T) {
	l, _, _ := newLocker(t)
	sem, err := l.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	var held string
	h := func(c *gin.Context) {
		ran++
		if lk := middleware.LockFrom(c); lk != nil {
			held = lk.Key()
		}
		c.Status(http.StatusNoContent)
	}
	id := keyfunc.Param("id", lockkey.Int(64))
	r := gin.New()
	r.POST("/orders/:id/pay", middleware.Lock(l, id), h)
	r.POST("/merchants/:id/charge", middleware.Limit(sem, id, http.StatusTooManyRequests), h)
	r.GET("/orders/:id", h)

	for _, tt := range []struct{ target, want string }{
		{"/orders/042/pay", "/orders/$id/pay:42"},
		{"/merchants/7/charge", "/merchants/$id/charge:7"},
	} {
		got, err := middleware.KeyFor(r, httptest.NewRequest("POST", tt.target, nil))
		if err != nil || got != tt.want {
			t.Fatalf("KeyFor(POST %s) = %q, %v; want %q", tt.target, got, err, tt.want)
		}
		if ran != 0 {
			t.Fatalf("KeyFor ran the handler behind the lock")
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("POST", tt.target, nil))
		if w.Code != http.StatusNoContent || held != got {
			t.Errorf("served: got %d holding %q, want 204 holding %q", w.Code, held, got)
		}
		ran = 0
	}
	if _, err := middleware.KeyFor(r, httptest.NewRequest("POST", "/orders/x/pay", nil)); !errors.Is(err, lockkey.ErrInvalidPart) {
		t.Errorf("KeyFor of a bad id: got %v, want ErrInvalidPart", err)
	}
	if _, err := middleware.KeyFor(r, httptest.NewRequest("GET", "/orders/1", nil)); !errors.Is(err, httplock.ErrNoLock) {
		t.Errorf("KeyFor of a route without a lock: got %v, want ErrNoLock", err)
	}
}
