package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// 50 requests for one order at once, no waiting: exactly one runs the
// handler, the other 49 get 409 with Retry-After and a problem body.
func TestLockConcurrentBusy(t *testing.T) {
	l, _, _ := newLocker(t)
	var ex exclusive
	entered := make(chan struct{})
	finish := make(chan struct{})
	r := gin.New()
	r.POST("/orders/:id/pay", middleware.Lock(l, keyfunc.Param("id", lockkey.Text())), func(c *gin.Context) {
		ex.enter()
		defer ex.leave()
		close(entered) // a second run would panic here
		<-finish
		c.Status(http.StatusOK)
	})

	const n = 50
	codes := make(chan *httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); codes <- serve(r, "POST", "/orders/42/pay", "") }()
	<-entered
	for range n - 1 {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- serve(r, "POST", "/orders/42/pay", "") }()
	}
	for range n - 1 {
		w := <-codes
		p := checkProblem(t, w, http.StatusConflict)
		ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
		if err != nil || ra < 1 || ra > 30 {
			t.Fatalf("got Retry-After %q, want 1..30 seconds", w.Header().Get("Retry-After"))
		}
		if p.Instance != "/orders/42/pay" || p.Namespace != "/orders/$id/pay" || p.Key != "" {
			t.Fatalf("got instance %q, namespace %q, key %q, want /orders/42/pay, /orders/$id/pay and no key", p.Instance, p.Namespace, p.Key)
		}
	}
	close(finish)
	wg.Wait()
	if w := <-codes; w.Code != http.StatusOK {
		t.Fatalf("got status %d for the holder, want 200", w.Code)
	}
	if got := ex.runs.Load(); got != 1 {
		t.Fatalf("got %d handler runs, want 1", got)
	}
}

// With Wait, the same 50 requests all succeed, one at a time.
func TestLockConcurrentWait(t *testing.T) {
	l, _, _ := newLocker(t)
	var ex exclusive
	r := gin.New()
	mw := middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithLockOptions(padlock.Options{
		Wait:  30 * time.Second,
		Retry: padlock.LinearBackoff(2 * time.Millisecond),
	}))
	r.POST("/orders/:id/pay", mw, func(c *gin.Context) {
		ex.enter()
		defer ex.leave()
		time.Sleep(time.Millisecond)
		c.Status(http.StatusOK)
	})
	const n = 50
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Add(1)
		go func() { defer wg.Done(); codes <- serve(r, "POST", "/orders/7/pay", "").Code }()
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Fatalf("got status %d, want 200 for every request", code)
		}
	}
	if got, want := ex.runs.Load(), int64(n); got != want {
		t.Fatalf("got %d handler runs, want %d", got, want)
	}
	if got := ex.maxActive.Load(); got != 1 {
		t.Fatalf("got %d handlers at once, want 1", got)
	}
}

// Busy with WithBusyStatus(423), and Retry-After from the holder's lease.
func TestLockBusyStatus(t *testing.T) {
	tests := []struct {
		name      string
		opts      []httplock.Option
		holderTTL time.Duration
		want      int
		wantRA    string
	}{
		{"default 409", nil, 2500 * time.Millisecond, http.StatusConflict, "3"},
		{"423", []httplock.Option{httplock.WithBusyStatus(http.StatusLocked)}, 10 * time.Second, http.StatusLocked, "10"},
		{"short lease rounds up to 1", nil, 200 * time.Millisecond, http.StatusConflict, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _, _ := newLocker(t)
			ran := false
			r := gin.New()
			r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), tt.opts...), func(c *gin.Context) { ran = true })

			lk, err := l.Acquire(context.Background(), "/orders/$id:1", padlock.Options{TTL: tt.holderTTL, NoRenew: true})
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Release(context.Background())
			w := serve(r, "POST", "/orders/1", "")
			checkProblem(t, w, tt.want)
			if got := w.Header().Get("Retry-After"); got != tt.wantRA {
				t.Fatalf("got Retry-After %q, want %q", got, tt.wantRA)
			}
			if ran {
				t.Fatal("handler ran while the lock was held elsewhere")
			}
		})
	}
}

// Requests whose key cannot be built never reach Redis or the handler.
func TestLockBadKey(t *testing.T) {
	l, _, _ := newLocker(t)
	r := gin.New()
	ran := 0
	h := func(c *gin.Context) { ran++ }
	r.POST("/orders/:id/pay", middleware.Lock(l, keyfunc.Query("id", lockkey.Text())), h)
	r.POST("/pay", middleware.Lock(l, keyfunc.JSON("order.id", lockkey.Text())), h)
	r.POST("/custom", middleware.Lock(l, keyfunc.Custom("x", lockkey.Text(), func(*gin.Context) (string, error) {
		return "", errors.New("token store down")
	})), h)

	tests := []struct {
		name, target, body string
		want               int
		wantDetail         string
	}{
		{"missing part", "/orders/1/pay", "", http.StatusBadRequest, `missing key part "query id"`},
		{"repeated part", "/orders/1/pay?id=1&id=2", "", http.StatusBadRequest, `ambiguous key part "query id" (2 values)`},
		{"huge body", "/pay", `{"order":{"id":"` + strings.Repeat("9", 2<<20) + `"}}`, http.StatusRequestEntityTooLarge, "request body too large (limit 1048576 bytes)"},
		{"malformed JSON", "/pay", `{"order":{"id":1}`, http.StatusBadRequest, "malformed request body"},
		{"missing JSON field", "/pay", `{"order":{}}`, http.StatusBadRequest, `missing key part "json field order.id"`},
		{"app key func fails", "/custom", "", http.StatusInternalServerError, "the lock key could not be built"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(r, "POST", tt.target, tt.body)
			p := checkProblem(t, w, tt.want)
			if !strings.HasPrefix(p.Detail, tt.wantDetail) {
				t.Fatalf("got detail %q, want %q", p.Detail, tt.wantDetail)
			}
			if p.Instance != strings.Split(tt.target, "?")[0] {
				t.Fatalf("got instance %q, want %q", p.Instance, tt.target)
			}
		})
	}
	if ran != 0 {
		t.Fatalf("got %d handler runs, want 0", ran)
	}
}

// Redis gone: 503, and the handler does not run unlocked.
func TestLockRedisDown(t *testing.T) {
	tests := []struct {
		name string
		opts []httplock.Option
	}{
		{"no wait", nil},
		{"with wait", []httplock.Option{httplock.WithLockOptions(padlock.Options{Wait: 300 * time.Millisecond})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, srv, _ := newLocker(t)
			ran := false
			r := gin.New()
			r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), tt.opts...), func(c *gin.Context) { ran = true })
			if w := serve(r, "POST", "/orders/1", ""); w.Code != http.StatusOK || !ran {
				t.Fatalf("before the kill: got status %d, ran %v, want 200 and a run", w.Code, ran)
			}
			ran = false
			srv.Kill(t)
			w := serve(r, "POST", "/orders/1", "")
			p := checkProblem(t, w, http.StatusServiceUnavailable)
			if ran {
				t.Fatal("handler ran without the lock")
			}
			if p.Detail != "the lock service is unavailable" {
				t.Fatalf("got detail %q, want the lock service is unavailable", p.Detail)
			}
		})
	}
}

// A panicking handler releases the lock, and the panic reaches gin's
// recovery.
func TestLockReleasedOnPanic(t *testing.T) {
	l, _, _ := newLocker(t)
	r := gin.New()
	r.Use(gin.CustomRecovery(func(c *gin.Context, err any) {
		c.String(http.StatusInternalServerError, "recovered: %v", err)
	}))
	mw := middleware.Lock(l, keyfunc.Param("id", lockkey.Text()))
	r.POST("/boom/:id", mw, func(c *gin.Context) { panic("boom") })
	r.POST("/ok/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithNamespace("/boom/:id")), func(c *gin.Context) {
		c.Status(http.StatusOK)
	})

	w := serve(r, "POST", "/boom/1", "")
	if w.Code != http.StatusInternalServerError || w.Body.String() != "recovered: boom" {
		t.Fatalf("got %d %q, want 500 \"recovered: boom\"", w.Code, w.Body)
	}
	if w := serve(r, "POST", "/ok/1", ""); w.Code != http.StatusOK {
		t.Fatalf("after the panic: got status %d, want 200 (lock released)", w.Code)
	}
}

// A request whose context is cancelled before the handler returns still
// releases the lock.
func TestLockReleasedAfterCancel(t *testing.T) {
	l, _, _ := newLocker(t)
	r := gin.New()
	mw := middleware.Lock(l, keyfunc.Param("id", lockkey.Text()))
	r.POST("/orders/:id", mw, func(c *gin.Context) { c.Status(http.StatusOK) })

	ctx, cancel := context.WithCancel(context.Background())
	r2 := gin.New()
	r2.POST("/orders/:id", mw, func(c *gin.Context) { cancel() })
	req := httptest.NewRequestWithContext(ctx, "POST", "/orders/1", nil)
	r2.ServeHTTP(httptest.NewRecorder(), req)

	if w := serve(r, "POST", "/orders/1", ""); w.Code != http.StatusOK {
		t.Fatalf("got status %d, want 200 (lock released after cancel)", w.Code)
	}
}

// The handler's context carries the lock: LockFrom and padlock.FromContext
// see it, it is cancelled when the lock is lost, and middlewares before
// Lock get their own request back afterwards.
func TestLockContext(t *testing.T) {
	l, srv, rdb := newLocker(t)
	r := gin.New()
	var outerCtxErr error
	r.Use(func(c *gin.Context) {
		c.Next()
		outerCtxErr = c.Request.Context().Err()
	})
	var (
		fence int64
		key   string
		cause error
	)
	mw := middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithLockOptions(padlock.Options{TTL: 300 * time.Millisecond}))
	r.POST("/orders/:id", mw, func(c *gin.Context) {
		lk := middleware.LockFrom(c)
		if lk == nil || padlock.FromContext(c.Request.Context()) != lk {
			t.Error("LockFrom: got nil or a lock other than the context's")
			return
		}
		fence, key = lk.Fence(), lk.Key()
		// Take the lock away behind its back: renewal notices and the
		// context is cancelled.
		for _, k := range srv.Keys(t) {
			if strings.Contains(k, "{/orders/") {
				rdb.Del(context.Background(), k)
			}
		}
		select {
		case <-c.Request.Context().Done():
			cause = context.Cause(c.Request.Context())
		case <-time.After(5 * time.Second):
		}
	})
	w := serve(r, "POST", "/orders/9", "")
	if w.Code != http.StatusOK {
		t.Fatalf("got status %d, want 200", w.Code)
	}
	if fence <= 0 || key != "/orders/$id:9" {
		t.Fatalf("got fence %d, key %q, want a fence > 0 and key /orders/$id:9", fence, key)
	}
	if !errors.Is(cause, padlock.ErrLockLost) {
		t.Fatalf("got context cause %v, want %v", cause, padlock.ErrLockLost)
	}
	if outerCtxErr != nil {
		t.Fatalf("got outer middleware context error %v, want nil", outerCtxErr)
	}
	if lk := middleware.LockFrom(&gin.Context{}); lk != nil {
		t.Fatalf("got LockFrom %v on a bare context, want nil", lk)
	}
}

// Two Lock middlewares on the same key nest without deadlock, and code in
// the handler can take the same lock again through the request context.
func TestLockReentrant(t *testing.T) {
	l, _, _ := newLocker(t)
	r := gin.New()
	group := r.Group("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithNamespace("order")))
	var again error
	group.POST("/pay", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithNamespace("order")), func(c *gin.Context) {
		lk, err := l.Acquire(c.Request.Context(), middleware.LockFrom(c).Key(), padlock.Options{})
		again = err
		_ = lk.Release(c.Request.Context())
		c.Status(http.StatusOK)
	})
	if w := serve(r, "POST", "/orders/5/pay", ""); w.Code != http.StatusOK || again != nil {
		t.Fatalf("got status %d, inner Acquire error %v, want 200 and nil", w.Code, again)
	}
}

// By default, routes have their own namespace; WithNamespace shares one.
func TestLockNamespace(t *testing.T) {
	l, _, _ := newLocker(t)
	hold := make(chan struct{})
	held := make(chan struct{})
	r := gin.New()
	ok := func(c *gin.Context) { c.Status(http.StatusOK) }
	r.POST("/orders/:id/pay", middleware.Lock(l, keyfunc.Param("id", lockkey.Text())), func(c *gin.Context) {
		if c.Param("id") == "1" {
			close(held)
			<-hold
		}
	})
	r.POST("/orders/:id/refund", middleware.Lock(l, keyfunc.Param("id", lockkey.Text())), ok)
	r.POST("/orders/:id/cancel", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithNamespace("/orders/:id/pay")), ok)
	r.POST("/o/:id/pay", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithNamespace("")), ok)

	done := make(chan struct{})
	go func() { defer close(done); serve(r, "POST", "/orders/1/pay", "") }()
	<-held
	tests := []struct {
		target string
		want   int
	}{
		{"/orders/1/refund", http.StatusOK},
		{"/orders/2/pay", http.StatusOK},
		{"/orders/1/cancel", http.StatusConflict},
		{"/o/1/pay", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			if w := serve(r, "POST", tt.target, ""); w.Code != tt.want {
				t.Fatalf("got status %d, want %d", w.Code, tt.want)
			}
		})
	}
	close(hold)
	<-done
}

func TestLockSkip(t *testing.T) {
	l, srv, _ := newLocker(t)
	srv.Kill(t) // a skipped request must not need Redis
	tests := []struct {
		name string
		opt  httplock.Option
	}{
		{"WithSkip", httplock.WithSkip(func(r *http.Request) bool { return r.Header.Get("X-Admin") != "" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gin.New()
			r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), tt.opt), func(c *gin.Context) {
				if middleware.LockFrom(c) != nil {
					t.Error("got a lock on a skipped request")
				}
				c.Status(http.StatusOK)
			})
			req := httptest.NewRequest("POST", "/orders/1", nil)
			req.Header.Set("X-Admin", "1")
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				t.Fatalf("got status %d, want 200", w.Code)
			}
			checkProblem(t, serve(r, "POST", "/orders/1", ""), http.StatusServiceUnavailable)
		})
	}
}

func TestLockResponder(t *testing.T) {
	l, _, _ := newLocker(t)
	var got *httplock.Problem
	respond := func(w http.ResponseWriter, r *http.Request, p *httplock.Problem) {
		got = p
		p.Type = "https://example.com/problems/busy"
		httplock.WriteProblem(w, r, p)
	}
	r := gin.New()
	ran := false
	r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithResponder(respond)), func(*gin.Context) { ran = true })
	lk, err := l.Acquire(context.Background(), "/orders/$id:1", padlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release(context.Background())

	w := serve(r, "POST", "/orders/1", "")
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `"type":"https://example.com/problems/busy"`) {
		t.Fatalf("got %d %s, want 409 with the custom type", w.Code, w.Body)
	}
	if ran || got == nil || !errors.Is(got.Err, padlock.ErrNotAcquired) || got.RetryAfter <= 0 {
		t.Fatalf("got ran %v, problem %+v, want no run and an ErrNotAcquired problem with RetryAfter", ran, got)
	}
}

func TestLockLongKeyShortened(t *testing.T) {
	l, _, _ := newLocker(t)
	r := gin.New()
	var key string
	r.POST("/docs/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Text())), func(c *gin.Context) { key = middleware.LockFrom(c).Key() })
	serve(r, "POST", "/docs/"+strings.Repeat("x", 500), "")
	if len(key) > lockkey.MaxKeyLen || !strings.HasPrefix(key, "/docs/$id:xxx") || !strings.Contains(key, ":#") {
		t.Fatalf("got key %q (%d bytes), want a hashed key of at most %d bytes", key, len(key), lockkey.MaxKeyLen)
	}
}

func TestOptionsPanic(t *testing.T) {
	l, _, _ := newLocker(t)
	key := keyfunc.Param("id", lockkey.Text())
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"nil locker", func() { middleware.Lock(nil, key) }, "middleware: Lock: nil *padlock.Locker"},
		{"nil key", func() { middleware.Lock(l, nil) }, "middleware: Lock: nil key func"},
		{"nil option", func() { middleware.Lock(l, key, nil) }, "middleware: Lock: option 1 is nil"},
		{"TTL", func() { middleware.Lock(l, key, httplock.WithLockOptions(padlock.Options{TTL: time.Microsecond})) },
			"middleware: Lock: WithLockOptions: padlock: invalid argument: Options.TTL"},
		{"Wait", func() { middleware.Lock(l, key, httplock.WithLockOptions(padlock.Options{Wait: -1})) },
			"middleware: Lock: WithLockOptions: padlock: invalid argument: Options.Wait"},
		{"busy status", func() { middleware.Lock(l, key, httplock.WithBusyStatus(http.StatusTooManyRequests)) },
			"middleware: Lock: WithBusyStatus: 429, want 409"},
		{"responder", func() { middleware.Lock(l, key, httplock.WithResponder(nil)) }, "middleware: Lock: WithResponder: nil Responder"},
		{"release timeout", func() { middleware.Lock(l, key, httplock.WithReleaseTimeout(0)) }, "middleware: Lock: WithReleaseTimeout: 0s, want > 0"},
		{"release error", func() { middleware.Lock(l, key, httplock.WithReleaseError(nil)) }, "middleware: Lock: WithReleaseError: nil func"},
		{"skip", func() { middleware.Lock(l, key, httplock.WithSkip(nil)) }, "middleware: Lock: WithSkip: nil func"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				got, _ := recover().(string)
				if !strings.HasPrefix(got, tt.want) {
					t.Fatalf("got panic %q, want %q", got, tt.want)
				}
			}()
			tt.f()
		})
	}
}
