package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/middleware"
)

// releaseErrors records what WithReleaseError's func is told.
type releaseErrors struct {
	paths []string
	errs  []error
}

func (re *releaseErrors) record(r *http.Request, err error) {
	re.paths = append(re.paths, r.URL.Path)
	re.errs = append(re.errs, err)
}

// check wants exactly one report, for path, of a lock lost by release time.
func (re *releaseErrors) check(t *testing.T, path string) {
	t.Helper()
	if len(re.errs) != 1 || re.paths[0] != path || !errors.Is(re.errs[0], padlock.ErrNotHeld) {
		t.Fatalf("got release reports %v %v, want one for %s matching ErrNotHeld", re.paths, re.errs, path)
	}
}

// deleteLockKeys takes the locks whose keys contain part away behind their
// holders' backs.
func deleteLockKeys(t *testing.T, keys []string, del func(string), part string) {
	t.Helper()
	n := 0
	for _, k := range keys {
		if strings.Contains(k, part) && !strings.Contains(k, "fence") {
			del(k)
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no lock key contains %q among %v", part, keys)
	}
}

// A Release that fails after the handler (the lock was lost meanwhile) is
// reported to WithReleaseError's func, and Lock also adds it to c.Errors;
// a Release that succeeds is not reported.
func TestLockReleaseError(t *testing.T) {
	l, srv, rdb := newLocker(t)
	var reports releaseErrors
	var ginErrs []error
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		for _, e := range c.Errors {
			ginErrs = append(ginErrs, e.Err)
		}
	})
	lose := true
	r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id"), middleware.WithReleaseError(reports.record)), func(c *gin.Context) {
		if lose {
			deleteLockKeys(t, srv.Keys(t), func(k string) { rdb.Del(context.Background(), k) }, "{/orders/")
		}
		c.Status(http.StatusOK)
	})
	if w := serve(r, "POST", "/orders/1", ""); w.Code != http.StatusOK {
		t.Fatalf("got status %d, want 200", w.Code)
	}
	reports.check(t, "/orders/1")
	if len(ginErrs) != 1 || !errors.Is(ginErrs[0], padlock.ErrNotHeld) {
		t.Fatalf("got gin errors %v, want one matching ErrNotHeld", ginErrs)
	}

	lose = false
	if w := serve(r, "POST", "/orders/2", ""); w.Code != http.StatusOK {
		t.Fatalf("got status %d, want 200", w.Code)
	}
	if len(reports.errs) != 1 || len(ginErrs) != 1 {
		t.Fatalf("a clean release was reported: %v, gin errors %v", reports.errs, ginErrs)
	}
}

// LockHTTP has no error list of its own: WithReleaseError is how a failed
// Release is seen.
func TestLockHTTPReleaseError(t *testing.T) {
	l, srv, rdb := newLocker(t)
	var reports releaseErrors
	mw := middleware.LockHTTP(l, keyfunc.RequestQuery("id"), middleware.WithNamespace("jobs"), middleware.WithReleaseError(reports.record))
	lose := true
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if lose {
			deleteLockKeys(t, srv.Keys(t), func(k string) { rdb.Del(context.Background(), k) }, "{jobs")
		}
		w.WriteHeader(http.StatusOK)
	}))
	if w := serve(h, "POST", "/run?id=1", ""); w.Code != http.StatusOK {
		t.Fatalf("got status %d, want 200", w.Code)
	}
	reports.check(t, "/run")

	lose = false
	if w := serve(h, "POST", "/run?id=2", ""); w.Code != http.StatusOK {
		t.Fatalf("got status %d, want 200", w.Code)
	}
	if len(reports.errs) != 1 {
		t.Fatalf("a clean release was reported: %v", reports.errs)
	}
}
