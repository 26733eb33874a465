package middleware_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// TestLockRedlockNoQuorum: when too few Redlock nodes answer, the request
// gets 503 (the lock service failed), not 409 (busy), and never runs.
func TestLockRedlockNoQuorum(t *testing.T) {
	servers := redistest.StartN(t, 3)
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		clients[i] = s.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	}
	l, err := padlock.NewRedlock(clients, padlock.WithMaxLease(padlock.DefaultTTL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ran := false
	r := gin.New()
	r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Text())), func(c *gin.Context) { ran = true })
	servers[0].Kill(t)
	servers[1].Kill(t)
	w := serve(r, "POST", "/orders/1", "")
	checkProblem(t, w, http.StatusServiceUnavailable)
	if ran {
		t.Fatal("handler ran without a quorum")
	}
}
