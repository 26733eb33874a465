package middleware_test

import (
	"net/http"
	"net/http/httptest"
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

// 20 requests for one merchant at once against 3 permits: at most 3 run
// the handler at once, every other is refused with the status the app
// picked, a Retry-After header and a problem body, and another merchant
// is not held up.
func TestLimitCapsConcurrency(t *testing.T) {
	for _, full := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(full), func(t *testing.T) {
			l, _, _ := newLocker(t)
			sem, err := l.Semaphore(3)
			if err != nil {
				t.Fatal(err)
			}
			var ex exclusive
			entered := make(chan struct{}, 10)
			finish := make(chan struct{})
			r := gin.New()
			r.POST("/merchants/:id/pay", middleware.Limit(sem, keyfunc.Param("id", lockkey.Int(64)), full), func(c *gin.Context) {
				ex.enter()
				defer ex.leave()
				if middleware.LockFrom(c) == nil {
					t.Error("LockFrom: got nil, want the permit")
				}
				entered <- struct{}{}
				<-finish
				c.Status(http.StatusOK)
			})
			const n = 20
			codes := make(chan *httptest.ResponseRecorder, n)
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() { codes <- serve(r, "POST", "/merchants/7/pay", "") })
				<-entered
			}
			for range n - 3 {
				wg.Go(func() { codes <- serve(r, "POST", "/merchants/7/pay", "") })
			}
			for range n - 3 {
				w := <-codes
				p := checkProblem(t, w, full)
				if ra := w.Header().Get("Retry-After"); ra != "1" {
					t.Errorf("got Retry-After %q, want 1", ra)
				}
				if p.Key != "" || p.Namespace != "/merchants/$id/pay" {
					t.Errorf("got key %q, namespace %q, want no key (no WithEchoKey) and /merchants/$id/pay", p.Key, p.Namespace)
				}
			}
			other := make(chan *httptest.ResponseRecorder, 1)
			go func() { other <- serve(r, "POST", "/merchants/8/pay", "") }()
			<-entered
			close(finish)
			if w := <-other; w.Code != http.StatusOK {
				t.Errorf("another merchant: got %d, want 200", w.Code)
			}
			wg.Wait()
			for range 3 {
				if w := <-codes; w.Code != http.StatusOK {
					t.Errorf("a request with a permit: got %d, want 200", w.Code)
				}
			}
			if m := ex.maxActive.Load(); m != 4 { // 3 for merchant 7, 1 for merchant 8
				t.Errorf("most handlers at once: got %d, want 4", m)
			}
		})
	}
}

// Requests that wait for a permit (WithLockOptions' Wait) all run in
// the end, never more than the permits at once.
func TestLimitWaits(t *testing.T) {
	l, _, _ := newLocker(t)
	sem, err := l.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	var ex exclusive
	r := gin.New()
	r.GET("/report/:id", middleware.Limit(sem, keyfunc.Param("id", lockkey.Int(64)), http.StatusServiceUnavailable,
		httplock.WithLockOptions(padlock.Options{Wait: 20 * time.Second})), func(c *gin.Context) {
		ex.enter()
		time.Sleep(10 * time.Millisecond)
		ex.leave()
		c.Status(http.StatusOK)
	})
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			if w := serve(r, "GET", "/report/1", ""); w.Code != http.StatusOK {
				t.Errorf("got %d, want 200 after waiting", w.Code)
			}
		})
	}
	wg.Wait()
	if m := ex.maxActive.Load(); m > 2 {
		t.Errorf("most handlers at once: got %d, want at most 2", m)
	}
}

func TestLimitPanicsOnBadConfig(t *testing.T) {
	l, _, _ := newLocker(t)
	sem, err := l.Semaphore(1)
	if err != nil {
		t.Fatal(err)
	}
	key := keyfunc.Param("id", lockkey.Int(64))
	for _, tc := range []struct {
		name string
		make func()
	}{
		{"409", func() { middleware.Limit(sem, key, http.StatusConflict) }},
		{"nil semaphore", func() { middleware.Limit(nil, key, http.StatusTooManyRequests) }},
		{"nil key", func() { middleware.Limit(sem, nil, http.StatusTooManyRequests) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if v := recover(); v == nil {
					t.Errorf("got no panic, want one")
				}
			}()
			tc.make()
		})
	}
}
