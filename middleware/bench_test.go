package middleware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// discard is a ResponseWriter that keeps nothing, so the benchmark measures
// the router and the middleware, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkLock is one POST /orders/:id/pay through gin.New: the bare
// handler, the same behind middleware.Lock on a real Redis, and two PINGs,
// the round-trip floor of any lock cycle. locked - bare is what the
// middleware adds to a request; locked - bare - cycle is the middleware's
// own share of it, the rest being padlock's Acquire and Release.
func BenchmarkLock(b *testing.B) {
	srv := redistest.Start(b)
	handler := func(c *gin.Context) { c.Status(http.StatusNoContent) }
	req := httptest.NewRequest("POST", "/orders/42/pay", nil)

	run := func(b *testing.B, r *gin.Engine, rt *redistest.Counter) {
		w := &discard{h: http.Header{}}
		r.ServeHTTP(w, req) // warm up: connection, scripts
		if rt != nil {
			rt.Reset()
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			r.ServeHTTP(w, req)
		}
		if rt != nil {
			b.ReportMetric(float64(rt.Load())/float64(b.N), "roundtrips/op")
		}
	}

	b.Run("bare", func(b *testing.B) {
		r := gin.New()
		r.POST("/orders/:id/pay", handler)
		run(b, r, nil)
	})
	b.Run("locked", func(b *testing.B) {
		rdb := srv.Client(b)
		rt := redistest.CountRoundTrips()
		rdb.AddHook(rt)
		l := lockerOn(b, rdb)
		r := gin.New()
		var failed atomic.Bool
		r.POST("/orders/:id/pay", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithResponder(
			func(w http.ResponseWriter, r *http.Request, p *httplock.Problem) { failed.Store(true) },
		)), handler)
		run(b, r, rt)
		if failed.Load() {
			b.Fatal("a request was refused")
		}
	})
	b.Run("cycle", func(b *testing.B) {
		// Acquire and Release alone, as the middleware calls them.
		rdb := srv.Client(b)
		l := lockerOn(b, rdb)
		ctx := context.Background()
		cycle := func() {
			lk, err := l.Acquire(ctx, "/orders/$id/pay:42", padlock.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := lk.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		cycle()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			cycle()
		}
	})
	b.Run("2ping", func(b *testing.B) {
		rdb := srv.Client(b)
		ctx := context.Background()
		rdb.Ping(ctx)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			rdb.Ping(ctx)
			rdb.Ping(ctx)
		}
	})
}
