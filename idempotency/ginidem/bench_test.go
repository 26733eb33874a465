package ginidem_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock/idempotency/ginidem"
	"github.com/padlockgo/padlock/internal/redistest"
)

// rewindBody is a request body that can be read again after rewind, so a
// benchmark can send the same request without allocating a new one.
type rewindBody struct {
	data []byte
	off  int
}

func (b *rewindBody) Read(p []byte) (int, error) {
	if b.off == len(b.data) {
		return 0, io.EOF
	}
	n := copy(p, b.data[b.off:])
	b.off += n
	return n, nil
}

func (b *rewindBody) Close() error { return nil }

// sink is a ResponseWriter that keeps nothing and, like net/http's, writes
// strings without converting them.
type sink struct{ discard }

func (s *sink) WriteString(v string) (int, error) { return len(v), nil }

// BenchmarkIdempotency is one POST /orders with an Idempotency-Key and a
// small JSON body through gin.New, on a real Redis:
//
//   - replay: the key's response is stored; the request is answered from
//     it. The target is one round trip (a GET).
//   - first: a new key each time: GET, lock, GET again, run, SET, release.
//   - bare: the handler alone, for the middleware's share.
//   - ping: one PING, the round-trip floor of the replay path.
//
// roundtrips/op counts commands and pipelines sent to Redis.
func BenchmarkIdempotency(b *testing.B) {
	srv := redistest.Start(b)
	body := []byte(`{"item":"book","qty":1}`)
	handler := func(c *gin.Context) {
		c.Header("Location", "/orders/1")
		c.Data(http.StatusCreated, "application/json", []byte(`{"id":1,"item":"book","qty":1}`))
	}

	setup := func(b *testing.B, idem bool) (*gin.Engine, *redistest.Counter) {
		r := gin.New()
		if !idem {
			r.POST("/orders", handler)
			return r, nil
		}
		rdb := srv.Client(b)
		rdb.FlushDB(context.Background()) // keys from an earlier -count round
		rt := redistest.CountRoundTrips()
		rdb.AddHook(rt)
		l := lockerOn(b, rdb)
		r.POST("/orders", ginidem.New(l, rdb, tester), handler)
		return r, rt
	}
	run := func(b *testing.B, r *gin.Engine, rt *redistest.Counter, next func(req *http.Request)) {
		req := httptest.NewRequest("POST", "/orders", nil)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", `"warm-up"`)
		rb := &rewindBody{data: body}
		req.Body, req.ContentLength = rb, int64(len(body))
		w := &sink{discard{h: http.Header{}}}
		r.ServeHTTP(w, req) // warm up: connection, scripts, the stored record
		if rt != nil {
			rt.Reset()
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			rb.off = 0
			req.Body = rb
			if next != nil {
				next(req)
			}
			r.ServeHTTP(w, req)
		}
		if rt != nil {
			b.ReportMetric(float64(rt.Load())/float64(b.N), "roundtrips/op")
		}
	}

	b.Run("replay", func(b *testing.B) {
		r, rt := setup(b, true)
		check := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/orders", nil)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", `"warm-up"`)
		req.Body, req.ContentLength = &rewindBody{data: body}, int64(len(body))
		r.ServeHTTP(httptest.NewRecorder(), req)
		req.Body = &rewindBody{data: body}
		r.ServeHTTP(check, req)
		if check.Header().Get("Idempotent-Replayed") != "true" {
			b.Fatalf("got %d %s without Idempotent-Replayed, want a replay", check.Code, check.Body)
		}
		run(b, r, rt, nil)
	})
	b.Run("first", func(b *testing.B) {
		r, rt := setup(b, true)
		n := 0
		vals := make([]string, 1)
		run(b, r, rt, func(req *http.Request) {
			n++
			vals[0] = strconv.Itoa(n)
			req.Header["Idempotency-Key"] = vals
		})
	})
	b.Run("bare", func(b *testing.B) {
		r, _ := setup(b, false)
		run(b, r, nil, nil)
	})
	b.Run("ping", func(b *testing.B) {
		rdb := srv.Client(b)
		ctx := context.Background()
		rdb.Ping(ctx)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			rdb.Ping(ctx)
		}
	})
}
