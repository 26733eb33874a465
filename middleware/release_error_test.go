package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/httplock"
	"github.com/padlockgo/padlock/internal/redistest"
	"github.com/padlockgo/padlock/keyfunc"
	"github.com/padlockgo/padlock/lockkey"
	"github.com/padlockgo/padlock/middleware"
)

// releaseErrors records what WithReleaseError's func is told.
type releaseErrors struct {
	paths []string
	errs  []error
}

func (re *releaseErrors) record(r *http.Request, err error) {
	// The request as it reached the middleware, not the one carrying the
	// lock's context, which the release has just cancelled.
	if padlock.FromContext(r.Context()) != nil || r.Context().Err() != nil {
		err = fmt.Errorf("told the request with the lock's context (ctx error %v): %w", r.Context().Err(), err)
		re.paths = append(re.paths, "wrong request")
	} else {
		re.paths = append(re.paths, r.URL.Path)
	}
	re.errs = append(re.errs, err)
}

// check wants exactly one report, for path, of a lock lost by release time.
func (re *releaseErrors) check(t *testing.T, path string) {
	t.Helper()
	if len(re.errs) != 1 || re.paths[0] != path || !errors.Is(re.errs[0], padlock.ErrNotHeld) {
		t.Fatalf("got release reports %v %v, want one for %s matching ErrNotHeld", re.paths, re.errs, path)
	}
}

// loser takes locks away behind their holders' backs while armed: it
// deletes the keys that contain part.
type loser struct {
	t     *testing.T
	srv   *redistest.Server
	rdb   *redis.Client
	part  string
	armed bool
}

func (ls *loser) maybeLose() {
	if !ls.armed {
		return
	}
	n := 0
	for _, k := range ls.srv.Keys(ls.t) {
		if strings.Contains(k, ls.part) {
			ls.rdb.Del(context.Background(), k)
			n++
		}
	}
	if n == 0 {
		ls.t.Errorf("no lock key contains %q", ls.part)
	}
}

// serveOK serves a POST to target and wants 200.
func serveOK(t *testing.T, h http.Handler, target string) {
	t.Helper()
	if w := serve(h, "POST", target, ""); w.Code != http.StatusOK {
		t.Fatalf("POST %s: got status %d, want 200", target, w.Code)
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
	ls := &loser{t: t, srv: srv, rdb: rdb, part: "{/orders/", armed: true}
	r.POST("/orders/:id", middleware.Lock(l, keyfunc.Param("id", lockkey.Text()), httplock.WithReleaseError(reports.record)), func(c *gin.Context) {
		ls.maybeLose()
		c.Status(http.StatusOK)
	})
	serveOK(t, r, "/orders/1")
	reports.check(t, "/orders/1")
	if len(ginErrs) != 1 || !errors.Is(ginErrs[0], padlock.ErrNotHeld) {
		t.Fatalf("got gin errors %v, want one matching ErrNotHeld", ginErrs)
	}

	ls.armed = false
	serveOK(t, r, "/orders/2")
	if len(reports.errs) != 1 || len(ginErrs) != 1 {
		t.Fatalf("a clean release was reported: %v, gin errors %v", reports.errs, ginErrs)
	}
}

// httplock.Lock has no error list of its own: WithReleaseError is how a
// failed Release is seen.
func TestHTTPLockReleaseError(t *testing.T) {
	l, srv, rdb := newLocker(t)
	var reports releaseErrors
	mw := httplock.Lock(l, httplock.Query("id", lockkey.Text()), httplock.WithNamespace("jobs"), httplock.WithReleaseError(reports.record))
	ls := &loser{t: t, srv: srv, rdb: rdb, part: "{jobs", armed: true}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ls.maybeLose()
		w.WriteHeader(http.StatusOK)
	}))
	serveOK(t, h, "/run?id=1")
	reports.check(t, "/run")

	ls.armed = false
	serveOK(t, h, "/run?id=2")
	if len(reports.errs) != 1 {
		t.Fatalf("a clean release was reported: %v", reports.errs)
	}
}
