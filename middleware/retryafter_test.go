package middleware_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
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
	var longest atomic.Int64 // the longest 50 ms hold, as a loaded machine sleeps it
	r := gin.New()
	r.POST("/jobs/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Int(64))), func(c *gin.Context) {
		if c.Param("id") == "1" {
			close(blocked)
			<-block
			return
		}
		began := time.Now()
		time.Sleep(50 * time.Millisecond)
		longest.Store(max(longest.Load(), int64(time.Since(began))))
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
	// 1, the header's least, when the holds took their 50 ms; a loaded
	// machine that slept them longer may say a second more than the
	// longest took. Never the lease.
	most := 1 + int(time.Duration(longest.Load()).Seconds())
	if got, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || got < 1 || got > most {
		t.Fatalf("got Retry-After %q, want 1 to %d (holds take 50ms, the longest %v), not the %v lease", w.Header().Get("Retry-After"), most, time.Duration(longest.Load()), padlock.DefaultTTL)
	}
}
