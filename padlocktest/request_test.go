package padlocktest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
	"github.com/padlockgo/padlock/padlocktest"
)

// routers returns the same payment route on http.ServeMux and on Gin,
// whose handler signals working and then waits for its request's context
// to end, answering 500 when the lock was lost.
func routers(l *padlock.Locker, working chan<- struct{}) map[string]http.Handler {
	wait := func(ctx context.Context) int {
		working <- struct{}{}
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), padlock.ErrLockLost) {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", httplock.Lock(l, httplock.PathValue("id", lockkey.Int(64)))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(wait(r.Context())) })))
	gin.SetMode(gin.TestMode)
	g := gin.New()
	g.POST("/orders/:id/pay", middleware.Lock(l, keyfunc.Param("id", lockkey.Int(64))), func(c *gin.Context) {
		c.Status(wait(c.Request.Context()))
	})
	return map[string]http.Handler{"ServeMux": mux, "Gin": g}
}

// LoseFor reaches the lock of a request in flight, on either router,
// without the test spelling its key.
func TestLoseFor(t *testing.T) {
	for _, name := range []string{"ServeMux", "Gin"} {
		t.Run(name, func(t *testing.T) {
			env := padlocktest.New(t, padlocktest.WithLockerOptions(
				padlock.WithDefaults(padlock.Options{TTL: shortLease})))
			ctx := ctxFor(t)
			working := make(chan struct{}, 1)
			h := routers(env.Locker(), working)[name]
			codes := make(chan int, 1)
			go func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("POST", "/orders/42/pay", nil).WithContext(ctx))
				codes <- rec.Code
			}()
			<-working
			lost, err := env.LoseFor(h, httptest.NewRequest("POST", "/orders/042/pay", nil))
			if !lost || err != nil {
				t.Fatalf("LoseFor = %v, %v; want true", lost, err)
			}
			if got := <-codes; got != http.StatusInternalServerError {
				t.Fatalf("status: got %d, want 500 (the handler saw its lock lost)", got)
			}
		})
	}
}

// BusyFor makes the request's lock busy: the request then gets 409, and
// once the holder lets go it goes through.
func TestBusyFor(t *testing.T) {
	for _, name := range []string{"ServeMux", "Gin"} {
		t.Run(name, func(t *testing.T) {
			env := padlocktest.New(t)
			ctx := ctxFor(t)
			working := make(chan struct{}, 1)
			h := routers(env.Locker(), working)[name]
			req := httptest.NewRequest("POST", "/orders/42/pay", nil)
			holder, err := env.BusyFor(ctx, h, req, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusConflict {
				t.Fatalf("status while busy: got %d, want 409", rec.Code)
			}
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			codes := make(chan int, 1)
			go func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("POST", "/orders/42/pay", nil).WithContext(rctx))
				codes <- rec.Code
			}()
			<-working // it took the lock
			cancel()
			<-codes
		})
	}
}

// A request that takes no lock, or whose key cannot be built, is a
// control error naming why.
func TestRequestControlsWithoutALock(t *testing.T) {
	env := padlocktest.New(t)
	h := routers(env.Locker(), make(chan struct{}, 1))["ServeMux"]
	_, err := env.LoseFor(h, httptest.NewRequest("GET", "/elsewhere", nil))
	if !errors.Is(err, padlocktest.ErrControl) || !errors.Is(err, httplock.ErrNoLock) {
		t.Errorf("LoseFor of a request without a lock: got %v, want ErrControl and ErrNoLock", err)
	}
	_, err = env.BusyFor(ctxFor(t), h, httptest.NewRequest("POST", "/orders/x/pay", nil), time.Minute)
	if !errors.Is(err, padlocktest.ErrControl) || !errors.Is(err, lockkey.ErrInvalidPart) {
		t.Errorf("BusyFor of a bad id: got %v, want ErrControl and ErrInvalidPart", err)
	}
}
