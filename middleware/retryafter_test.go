package middleware_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// Requests that hold their lock for 50ms make a busy answer say
// "Retry-After: 1", the header's minimum, not the holder's renewed 30s
// lease.
func TestLockRetryAfterFromHoldTimes(t *testing.T) {
	l, _, _ := newLocker(t)
	block := make(chan struct{})
	blocked := make(chan struct{})
	r := gin.New()
	r.POST("/jobs/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Int(64))), func(c *gin.Context) {
		if c.Param("id") == "1" {
			close(blocked)
			<-block
			return
		}
		time.Sleep(50 * time.Millisecond)
	})
	for _, id := range []string{"2", "3", "4"} {
		if w := serve(r, "POST", "/jobs/"+id, ""); w.Code != http.StatusOK {
			t.Fatalf("got status %d, want 200", w.Code)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); serve(r, "POST", "/jobs/1", "") }()
	<-blocked
	w := serve(r, "POST", "/jobs/1", "")
	close(block)
	<-done
	checkProblem(t, w, http.StatusConflict)
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Fatalf("got Retry-After %q, want 1 (holds take 50ms), not the %v lease", got, padlock.DefaultTTL)
	}
}
