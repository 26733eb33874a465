package middleware_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// With a long Wait, a Redis that cannot be reached is a 503 after a couple
// of failed attempts, not after the whole wait, and never a 409: a killed
// server, a Redlock with 2 of 3 nodes killed, and a paused (hung) server.
// The bound asserted, a third of the wait, leaves a loaded machine ample
// slack; the engine gives up after 2 failed attempts or 1s.
func TestLockUnavailableWithWait(t *testing.T) {
	t.Parallel() // its cases take servers of their own down
	const wait = 30 * time.Second
	tests := []struct {
		name  string
		setup func(t *testing.T) (*padlock.Locker, func())
	}{
		{"killed server", func(t *testing.T) (*padlock.Locker, func()) {
			l, srv, _ := newLocker(t)
			return l, func() { srv.Kill(t) }
		}},
		{"paused server", func(t *testing.T) (*padlock.Locker, func()) {
			l, srv, _ := newLocker(t)
			return l, func() { srv.Pause(t); t.Cleanup(func() { srv.Resume(t) }) }
		}},
		{"Redlock, 2 of 3 nodes killed", func(t *testing.T) (*padlock.Locker, func()) {
			l, servers := startRedlock(t)
			return l, func() { servers[0].Kill(t); servers[1].Kill(t) }
		}},
	}
	tests = append(tests, struct {
		name  string
		setup func(t *testing.T) (*padlock.Locker, func())
	}{"Redlock loses its quorum while the request waits for a busy key", func(t *testing.T) (*padlock.Locker, func()) {
		l, servers := startRedlock(t)
		for _, s := range servers {
			s.PersistEveryWrite(t) // fresh nodes vote at once
		}
		// The key is held by another Locker on the same nodes, one that
		// waits for a node long enough for a loaded machine: taking it is
		// the setup, not what is tested.
		holder := redlockOn(t, servers, padlock.WithNodeTimeout(2*time.Second))
		lk, err := holder.Acquire(context.Background(), "/orders/$id:1", padlock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lk.Release(context.Background()) })
		return l, func() {
			killed := make(chan struct{})
			time.AfterFunc(300*time.Millisecond, func() { defer close(killed); servers[0].Kill(t); servers[1].Kill(t) })
			t.Cleanup(func() { <-killed })
		}
	}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // servers of its own, which it takes down
			l, fail := tt.setup(t)
			ran := false
			r := gin.New()
			r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Int(64)),
				httplock.WithLockOptions(padlock.Options{Wait: wait})), func(c *gin.Context) { ran = true })
			fail()
			start := time.Now()
			w := serve(r, "POST", "/orders/1", "")
			took := time.Since(start)
			checkProblem(t, w, http.StatusServiceUnavailable)
			if ran {
				t.Fatal("handler ran without the lock")
			}
			if took > wait/3 {
				t.Fatalf("got the 503 after %v, want it well before the %v wait", took, wait)
			}
			t.Logf("503 after %v", took.Round(time.Millisecond))
		})
	}
}

// startRedlock returns a Redlock Locker on 3 fresh servers, closed when t
// ends.
func startRedlock(t *testing.T) (*padlock.Locker, []*redistest.Server) {
	servers := redistest.StartN(t, 3)
	return redlockOn(t, servers), servers
}

// redlockOn returns a Redlock Locker on servers, closed when t ends.
func redlockOn(t *testing.T, servers []*redistest.Server, opts ...padlock.RedlockOption) *padlock.Locker {
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		clients[i] = s.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	}
	opts = append([]padlock.RedlockOption{padlock.WithMaxLease(padlock.DefaultTTL), padlock.WithPersistentNodes()}, opts...)
	l, err := padlock.NewRedlock(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
